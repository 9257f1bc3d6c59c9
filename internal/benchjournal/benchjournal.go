// Package benchjournal is a synthetic, read-only journal of any size for
// benchmarks: its records are generated on demand from their position, so
// a package of a gigabyte is written through the real package writer
// without a gigabyte of storage behind it.
//
// It implements disclosure.Source, the methods the package writer calls
// (Checkpoint, ConsistencyProof, Head, CaseRuns, InclusionProofAt,
// LogPositions, ReadPage), and nothing else.
package benchjournal

import (
	"context"
	"fmt"
	"strconv"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Spec shapes the journal.
type Spec struct {
	Origin        string
	Runs          int // number of runs
	RecordsPerRun int // records per run, the conclusion included
	PayloadBytes  int // bytes of opaque text per record
	// UnsealedEvery leaves every n-th run unsealed (no conclusion); 0
	// seals every run.
	UnsealedEvery int
}

// Journal is the synthetic journal. Every run's first record is stamped
// with Case, so a package of "everything" is a selection of that one case.
type Journal struct {
	spec   Spec
	Case   store.CaseID
	runs   []store.RunID
	heads  []store.Digest
	index  []int64 // log index of each run, -1 if unsealed
	tree   *log.MemStore
	size   uint64
	root   log.Hash
	byRun  map[store.RunID]int
	text   []byte
	cursor struct { // the last record generated, to continue a run's chain
		run  int
		seq  store.Seq
		hash store.Digest
	}
}

// New builds the journal: it generates every record once to chain it and
// builds the log of the sealed runs' terminal hashes.
func New(spec Spec) (*Journal, error) {
	if spec.Runs < 1 || spec.RecordsPerRun < 2 || spec.PayloadBytes < 0 || spec.Origin == "" {
		return nil, fmt.Errorf("benchjournal: bad spec %+v", spec)
	}
	j := &Journal{spec: spec, tree: &log.MemStore{}, byRun: make(map[store.RunID]int, spec.Runs)}
	j.Case = store.CaseID{0x01, 0x90, 0xCA, 0x5E}
	j.text = make([]byte, spec.PayloadBytes)
	const alphabet = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789"
	for i := range j.text {
		j.text[i] = alphabet[(i*7+i/13)%len(alphabet)]
	}
	var leaves []log.Hash
	for i := range spec.Runs {
		var id store.RunID
		id[0], id[1] = 0x01, 0x90 // a 2024 timestamp prefix; then the run number
		for b := range 8 {
			id[15-b] = byte(uint64(i+1) >> (8 * b))
		}
		j.runs = append(j.runs, id)
		j.byRun[id] = i
		var h store.Digest
		var buf []byte
		for s := 1; s <= spec.RecordsPerRun; s++ {
			buf = j.raw(buf[:0], i, store.Seq(s))
			h = store.ChainHash(h, buf)
		}
		j.heads = append(j.heads, h)
		if j.sealed(i) {
			j.index = append(j.index, int64(len(leaves)))
			leaves = append(leaves, log.Hash(h))
		} else {
			j.index = append(j.index, -1)
		}
	}
	root, err := log.Append(context.Background(), j.tree, 0, leaves...)
	if err != nil {
		return nil, err
	}
	j.size, j.root = uint64(len(leaves)), root
	j.cursor.run = -1
	return j, nil
}

func (j *Journal) sealed(i int) bool {
	return j.spec.UnsealedEvery == 0 || (i+1)%j.spec.UnsealedEvery != 0
}

// raw appends the canonical bytes of run i's record seq: members in
// canonical order, written directly because encoding a gigabyte through a
// general canonicalizer would measure the generator, not the verifier.
func (j *Journal) raw(b []byte, i int, seq store.Seq) []byte {
	run := j.runs[i].String()
	if int(seq) == j.spec.RecordsPerRun && j.sealed(i) {
		b = append(b, `{"epoch":1,"kind":"RunConcluded","outcome":"succeeded","run":"`...)
		b = append(b, run...)
		b = append(b, `","seq":`...)
		b = strconv.AppendUint(b, uint64(seq), 10)
		return append(b, `,"v":1}`...)
	}
	b = append(b, '{')
	if seq == 1 {
		b = append(b, `"case":"`...)
		b = append(b, j.Case.String()...)
		b = append(b, `",`...)
	}
	b = append(b, `"epoch":1,"kind":"StepCompleted","n":`...)
	b = strconv.AppendUint(b, uint64(i)*1000003+uint64(seq), 10)
	b = append(b, `,"run":"`...)
	b = append(b, run...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, uint64(seq), 10)
	b = append(b, `,"text":"`...)
	b = append(b, j.text...)
	return append(b, `","v":1}`...)
}

// body is what store.DecodeBody returns for raw(i, seq), built without
// decoding (the package's test holds the two equal).
func (j *Journal) body(i int, seq store.Seq) store.Body {
	b := store.Body{Seq: seq, Run: j.runs[i], Epoch: 1, V: 1, Kind: "StepCompleted"}
	if int(seq) == j.spec.RecordsPerRun && j.sealed(i) {
		b.Kind, b.Fields = store.KindRunConcluded, []byte(`{"outcome":"succeeded"}`)
		return b
	}
	if seq == 1 {
		b.Case = j.Case
	}
	f := append([]byte(`{"n":`), strconv.AppendUint(nil, uint64(i)*1000003+uint64(seq), 10)...)
	f = append(f, `,"text":"`...)
	f = append(f, j.text...)
	b.Fields = append(f, `"}`...)
	return b
}

// Checkpoint implements disclosure.Source.
func (j *Journal) Checkpoint(context.Context) (store.Checkpoint, error) {
	return store.Checkpoint{Origin: j.spec.Origin, Size: j.size, Root: store.Digest(j.root)}, nil
}

// ConsistencyProof implements disclosure.Source.
func (j *Journal) ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	p, err := log.ConsistencyProof(ctx, j.tree, oldSize, newSize)
	return digests(p), err
}

// Tenant names the journal's tenant, the default.
func (j *Journal) Tenant() string { return store.DefaultTenant }

// Head implements disclosure.Source.
func (j *Journal) Head(_ context.Context, run store.RunID) (store.Head, error) {
	i, ok := j.byRun[run]
	if !ok {
		return store.Head{}, nil
	}
	return store.Head{Seq: store.Seq(j.spec.RecordsPerRun), Hash: j.heads[i]}, nil
}

// CaseRuns implements disclosure.Source: every run is stamped with Case.
func (j *Journal) CaseRuns(_ context.Context, c store.CaseID, after *store.RunID, limit int) ([]store.RunID, error) {
	if c != j.Case {
		return []store.RunID{}, nil
	}
	start := 0
	if after != nil {
		i, ok := j.byRun[*after]
		if !ok {
			return nil, fmt.Errorf("benchjournal: unknown cursor %s", after)
		}
		start = i + 1
	}
	end := min(start+limit, len(j.runs))
	return append([]store.RunID{}, j.runs[start:end]...), nil
}

// InclusionProofAt implements disclosure.Source.
func (j *Journal) InclusionProofAt(ctx context.Context, run store.RunID, size uint64) (*store.Inclusion, error) {
	i, ok := j.byRun[run]
	if !ok || j.index[i] < 0 || uint64(j.index[i]) >= size {
		return nil, nil
	}
	p, err := log.InclusionProof(ctx, j.tree, uint64(j.index[i]), size)
	if err != nil {
		return nil, err
	}
	return &store.Inclusion{Index: uint64(j.index[i]), Size: size, Leaf: j.heads[i], Proof: digests(p)}, nil
}

// LogPositions implements disclosure.Source.
func (j *Journal) LogPositions(_ context.Context, runs []store.RunID) ([]*store.Position, error) {
	out := make([]*store.Position, len(runs))
	for k, r := range runs {
		if i, ok := j.byRun[r]; ok && j.index[i] >= 0 {
			out[k] = &store.Position{Index: uint64(j.index[i]), Leaf: j.heads[i]}
		}
	}
	return out, nil
}

// ReadPage implements disclosure.Source. Records are regenerated and chained;
// reading a run in order continues from the last record read.
func (j *Journal) ReadPage(_ context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	i, ok := j.byRun[run]
	if !ok || from < 1 {
		return nil, nil
	}
	if j.cursor.run != i || j.cursor.seq != from-1 {
		j.cursor.run, j.cursor.seq, j.cursor.hash = i, 0, store.ZeroDigest
		for s := store.Seq(1); s < from; s++ {
			j.cursor.hash = store.ChainHash(j.cursor.hash, j.raw(nil, i, s))
			j.cursor.seq = s
		}
	}
	var out []store.Record
	for s := from; int(s) <= j.spec.RecordsPerRun && len(out) < limit; s++ {
		raw := j.raw(nil, i, s)
		r := store.Record{Body: j.body(i, s), PrevHash: j.cursor.hash, Raw: raw}
		r.Hash = store.ChainHash(r.PrevHash, raw)
		out = append(out, r)
		j.cursor.seq, j.cursor.hash = s, r.Hash
	}
	return out, nil
}

func digests(hs []log.Hash) []store.Digest {
	out := make([]store.Digest, len(hs))
	for i, h := range hs {
		out[i] = store.Digest(h)
	}
	return out
}
