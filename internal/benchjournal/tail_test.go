package benchjournal

import (
	"context"
	"testing"
	"time"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// The slowest 1% are the proofs with the longest wall time, and their
// parts are theirs: a tail of slow statements reads as statements, not as
// the client's other work.
func TestTail_SlowestAreTheLongestWalls(t *testing.T) {
	var ss []sample
	for i := range 200 {
		s := sample{wall: 100 * time.Microsecond, cpu: 50 * time.Microsecond, traced: true,
			trace: Trace{Statements: 80 * time.Microsecond, Count: 1}}
		if i%100 == 7 { // two slow ones, slow in their statement, on a new connection
			s.wall, s.trace.Statements, s.trace.FirstUse, s.gcs = 2*time.Millisecond, 1900*time.Microsecond, true, 1
		}
		ss = append(ss, s)
	}
	tl := tail(ss)
	if tl.Slowest.Proofs != 2 || tl.All.Proofs != 200 {
		t.Fatalf("proofs: slowest %d, all %d", tl.Slowest.Proofs, tl.All.Proofs)
	}
	if got := tl.Slowest; got.WallUs != 2000 || got.StatementUs != 1900 || got.OtherUs != 100 || got.FirstUse != 1 || got.WithGC != 1 {
		t.Errorf("slowest = %+v", got)
	}
	if got := tl.All; got.FirstUse != 0.01 || got.StatementUs != (198*80+2*1900)/200.0 {
		t.Errorf("all = %+v", got)
	}
	// Without a tracer the statement share is unknown, not zero.
	for i := range ss {
		ss[i].traced = false
	}
	if got := tail(ss).Slowest; got.StatementUs != -1 || got.OtherUs != got.WallUs {
		t.Errorf("untraced slowest = %+v", got)
	}
}

// memProver serves proofs from a SealedLog in memory, and is a Tracer
// that counts its proofs.
type memProver struct {
	l            *SealedLog
	index        map[store.RunID]uint64
	begun, ended int
	asked        []uint64 // the log index of every run proved, in order
}

// newMemProver is a memProver over a SealedLog of n runs.
func newMemProver(t *testing.T, n int) *memProver {
	t.Helper()
	l, err := NewSealedLog(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	p := &memProver{l: l, index: map[store.RunID]uint64{}}
	for i, r := range l.Runs {
		p.index[r] = uint64(i)
	}
	return p
}

func (p *memProver) InclusionProof(ctx context.Context, run store.RunID) (*store.Inclusion, error) {
	i, size := p.index[run], uint64(len(p.l.Runs))
	p.asked = append(p.asked, i)
	proof, err := log.InclusionProof(ctx, p.l.Tree, i, size)
	if err != nil {
		return nil, err
	}
	return &store.Inclusion{Index: i, Size: size, Leaf: store.Digest(p.l.Leaves[i]), Proof: store.Digests(proof)}, nil
}

func (p *memProver) ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	proof, err := log.ConsistencyProof(ctx, p.l.Tree, oldSize, newSize)
	return store.Digests(proof), err
}

func (p *memProver) BeginTrace() { p.begun++ }
func (p *memProver) EndTrace() Trace {
	p.ended++
	return Trace{Statements: time.Microsecond, Count: 1}
}

// ProofBench asks a Prover that is a Tracer for each proof's trace, and
// reports it in each pass's tail.
func TestProofBench_TracesEveryProof(t *testing.T) {
	ctx := context.Background()
	p := newMemProver(t, 300)
	l := p.l
	rep, err := ProofBench(ctx, p, l.Runs, l.Tree, uint64(len(l.Runs)), l.Root, 10)
	if err != nil {
		t.Fatal(err)
	}
	if p.begun != 40 || p.ended != 40 {
		t.Errorf("traces begun %d, ended %d; want one per proof of 4 passes of 10", p.begun, p.ended)
	}
	for _, l := range []ProofLatency{rep.Cold.Inclusion, rep.Cold.Consistency, rep.Inclusion, rep.Consistency} {
		if l.Tail == nil || l.Tail.All.Proofs != 10 || l.Tail.Slowest.Proofs != 1 || l.Tail.All.StatementUs != 1 {
			t.Errorf("tail = %+v", l.Tail)
		}
	}
}

// With Served, the store serves that many proofs before the second pass,
// and none of the second pass's proofs is of a run it served: the warm-up
// is other traffic, not a pre-read of the runs measured.
func TestProofBench_ServedProofsAreOfOtherRuns(t *testing.T) {
	ctx := context.Background()
	p := newMemProver(t, 301)
	l := p.l
	rep, err := ProofBenchWith(ctx, p, l.Runs, l.Tree, uint64(len(l.Runs)), l.Root, ProofOptions{Samples: 10, Served: 500})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Served != 500 || len(p.asked) != 10+500+10 {
		t.Fatalf("served %d, proofs asked %d; want 500 and 520", rep.Served, len(p.asked))
	}
	served := map[uint64]bool{}
	for _, i := range p.asked[10 : 10+500] {
		served[i] = true
	}
	if len(served) < 100 {
		t.Errorf("served proofs cover %d runs of 301; want them spread", len(served))
	}
	for _, i := range p.asked[10+500:] {
		if served[i] {
			t.Errorf("the second pass measured run %d, which was served before it", i)
		}
	}
}

// TestProofRun_MeasuredRunsNeverProvenBefore: across the passes of one
// benchmark, on stores opened one after another (cold starts, then the
// steady-state passes after served traffic), no measured inclusion proof
// is of a run any earlier proof proved, measured or served. The first
// pass used to pick from every run, so a few runs of the second pass at
// 10^6 had been proven by the first, and read from caches it had filled.
func TestProofRun_MeasuredRunsNeverProvenBefore(t *testing.T) {
	ctx := context.Background()
	p := newMemProver(t, 2001)
	l := p.l
	run := NewProofRun(l.Runs, l.Tree, uint64(len(l.Runs)), l.Root, 7)
	for range 2 { // two cold starts
		if _, _, err := run.Pass(ctx, p, 100); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := ProofBenchWith(ctx, p, l.Runs, l.Tree, uint64(len(l.Runs)), l.Root, ProofOptions{Samples: 100, Served: 300, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reproven != 0 || run.Reproven != 0 {
		t.Fatalf("reproven %d (%d in all), want none", rep.Reproven, run.Reproven)
	}
	// Two cold passes, the first pass, the served, the second pass.
	if len(p.asked) != 3*100+300+100 {
		t.Fatalf("%d proofs asked, want 700", len(p.asked))
	}
	served := map[uint64]bool{}
	for _, i := range p.asked[300:600] {
		served[i] = true
	}
	seen := map[uint64]bool{}
	for n, i := range p.asked {
		if n >= 300 && n < 600 {
			continue
		}
		if seen[i] || served[i] {
			t.Fatalf("measured proof %d is of run %d, proven before", n, i)
		}
		seen[i] = true
	}
}

// A benchmark that asks for more measured proofs than the log has runs at
// odd indexes proves some runs again, and says how many.
func TestProofRun_ReprovenCounted(t *testing.T) {
	ctx := context.Background()
	p := newMemProver(t, 21)
	l := p.l
	run := NewProofRun(l.Runs, l.Tree, uint64(len(l.Runs)), l.Root, 7)
	if _, _, err := run.Pass(ctx, p, 15); err != nil {
		t.Fatal(err)
	}
	if run.Reproven != 5 {
		t.Fatalf("reproven %d, want 5 (15 proofs of 10 odd runs)", run.Reproven)
	}
}
