package benchjournal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/transparency-dev/merkle/compact"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Prover is what ProofBench asks of a store: proofs from its Merkle log.
type Prover interface {
	InclusionProof(ctx context.Context, run store.RunID) (*store.Inclusion, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error)
}

// cacheReporter is a Prover with a node cache whose reads it counts, as
// the SQLite and PostgreSQL stores have.
type cacheReporter interface {
	NodeCacheStats() log.CacheStats
}

// tripReporter is a Prover that counts the statements its proofs run, as
// both stores do.
type tripReporter interface {
	ProofRoundTrips() uint64
}

// cacheWarmer is a Prover that can fill its node cache ahead of proofs.
type cacheWarmer interface {
	WarmNodeCache(ctx context.Context) error
}

// roundTripper is a Prover that can run its cheapest statement, the log's
// size read, as both stores can: one round trip with no proof work, the
// ceiling a one-round-trip proof is measured beside.
type roundTripper interface {
	RoundTrip(ctx context.Context) error
}

// bufferReporter is a Prover on a server that counts the pages its proofs'
// reads touch, as the PostgreSQL store's does: cumulative hits in the
// server's buffers and reads from outside them.
type bufferReporter interface {
	ServerBuffers(ctx context.Context) (hits, reads uint64, err error)
}

// readTimer is a Prover on a server that times its reads from outside its
// buffers, as PostgreSQL does with track_io_timing on (ok false: off).
type readTimer interface {
	ServerReadTime(ctx context.Context) (total time.Duration, ok bool, err error)
}

// ProofLatency is one kind of proof's figures.
type ProofLatency struct {
	Proofs int     `json:"proofs"`
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	// CPUP50us and CPUP99us are the process's CPU time (user and system,
	// every thread, GC included) over each proof: what the proof costs
	// with the machine's scheduler taken out, so that a wall p99 on a
	// loaded machine can be judged. Zero where the platform has no
	// per-process CPU clock.
	CPUP50us float64 `json:"cpu_p50_us"`
	CPUP99us float64 `json:"cpu_p99_us"`
	// NodeReads is the mean number of log nodes one proof reads (counted on
	// a copy of the same tree in memory).
	NodeReads float64 `json:"node_reads"`
	// StoreReads is the mean number of those the store read from its
	// tables rather than its node cache (-1: the store does not say).
	StoreReads float64 `json:"store_reads"`
	// RoundTrips is the mean number of statements one proof ran: round
	// trips to the server on PostgreSQL, calls into the engine on SQLite
	// (-1: the store does not say).
	RoundTrips float64 `json:"round_trips"`
	// GCs is how many garbage collections ran during the proofs.
	GCs uint32 `json:"gcs"`
	// ServerPages is the mean number of table and index pages one proof
	// touched on the server, and ServerReads how many of those were not in
	// its buffers (shared_buffers on PostgreSQL) and were read from the
	// kernel: what a proof costs the server, counted, so that it can be
	// judged on a loaded machine. -1: the store does not say. A cold pass
	// counts the node cache's fill too, which runs beside it.
	ServerPages float64 `json:"server_pages"`
	ServerReads float64 `json:"server_reads"`
	// ServerReadUs is the server's time reading those pages from outside
	// its buffers, per proof (the whole database's, so a cold pass counts
	// the node cache's fill too): microseconds per page when the kernel
	// had them cached, a disk read's when not. -1: not timed (PostgreSQL:
	// track_io_timing off).
	ServerReadUs float64 `json:"server_read_us"`
	// Tail is where the slowest 1% of the proofs spent their time, beside
	// every proof's mean.
	Tail *ProofTail `json:"tail,omitempty"`
}

// ProofReport is what ProofBench measures at one log size.
type ProofReport struct {
	Size        uint64       `json:"size"`
	Inclusion   ProofLatency `json:"inclusion"`
	Consistency ProofLatency `json:"consistency"`
	// RoundTrip is the ceiling, measured in the second pass alternately
	// with the proofs: the store's cheapest statement (the log's size),
	// one round trip and no proof work. A one-round-trip proof cannot beat
	// it; on a loaded machine its p99 shows what the scheduler adds. Zero
	// when the store cannot run it.
	RoundTrip ProofLatency `json:"round_trip"`
	// WarmSeconds is how long the store took to fill its node cache after
	// the cold pass (zero: it has none to fill).
	WarmSeconds float64 `json:"cache_fill_seconds"`
	// Served is how many inclusion proofs of other runs the store served,
	// unmeasured, before the second pass (ProofOptions.Served), and
	// ServedSeconds how long they took.
	Served        int     `json:"served_before"`
	ServedSeconds float64 `json:"served_seconds"`
	// Reproven is how many measured inclusion proofs were of runs proven
	// before: zero unless the passes asked for more than the log's runs at
	// odd indexes (ProofRun).
	Reproven int `json:"reproven,omitempty"`
	// Cold is the first pass, from a store just opened (its node cache
	// empty, filling in the background); Inclusion and Consistency are a
	// second pass over other random proofs, once the cache is full.
	Cold struct {
		Inclusion   ProofLatency `json:"inclusion"`
		Consistency ProofLatency `json:"consistency"`
	} `json:"cold"`
}

// ProofBench asks p for k inclusion proofs of runs picked at random and k
// consistency proofs from random older sizes to size, one at a time, twice:
// a first pass on a cold store, then, once the store's node cache is full,
// a second, and reports their latency.
// tree is the same log's nodes (in memory), on which it counts the nodes
// each proof reads. Every proof is checked against root, so a fast wrong
// answer is an error, not a figure.
func ProofBench(ctx context.Context, p Prover, runs []store.RunID, tree log.NodeReader, size uint64, root log.Hash, k int) (ProofReport, error) {
	return ProofBenchWith(ctx, p, runs, tree, size, root, ProofOptions{Samples: k})
}

// ProofOptions are ProofBench's settings.
type ProofOptions struct {
	// Samples is how many proofs of each kind each pass measures.
	Samples int
	// Served, when above zero, is how many inclusion proofs the store
	// serves, unmeasured, between the node cache's fill and the second
	// pass: the traffic a long-running server has seen, which leaves its
	// buffers in the state they keep (the fill has just filled them with
	// what it read). They are of runs at even log indexes, and the second
	// pass then proves runs at odd ones, so that no measured proof is of
	// a run served before it; runs sharing a page with one are, as on a
	// server that has run a while.
	Served int
	// Seed picks the runs and sizes (0: one of its own, so that a second
	// benchmark on a kept log proves other runs than the first).
	Seed uint64
	// Run, when set, is the benchmark these passes belong to: no measured
	// proof is of a run one of its earlier passes proved (on another
	// store, say). Nil: a benchmark of their own.
	Run *ProofRun
	// NoFirstPass skips the first pass (Cold in the report): a caller
	// that measured first passes of its own, on stores it restarted.
	NoFirstPass bool
}

// ProofBenchWith is ProofBench with options.
func ProofBenchWith(ctx context.Context, p Prover, runs []store.RunID, tree log.NodeReader, size uint64, root log.Hash, o ProofOptions) (ProofReport, error) {
	k := o.Samples
	rep := ProofReport{Size: size, Served: o.Served}
	b := o.Run
	if b == nil {
		b = NewProofRun(runs, tree, size, root, o.Seed)
	}
	rep.Reproven = b.Reproven
	var err error
	if !o.NoFirstPass {
		if rep.Cold.Inclusion, rep.Cold.Consistency, err = b.Pass(ctx, p, k); err != nil {
			return rep, err
		}
	}
	if w, ok := p.(cacheWarmer); ok {
		t0 := time.Now()
		if err := w.WarmNodeCache(ctx); err != nil {
			return rep, fmt.Errorf("fill the node cache: %w", err)
		}
		rep.WarmSeconds = time.Since(t0).Seconds()
	}
	if o.Served > 0 && len(runs) > 1 {
		d, err := b.Serve(ctx, p, o.Served)
		if err != nil {
			return rep, err
		}
		rep.ServedSeconds = d.Seconds()
	}
	if rep.Inclusion, rep.Consistency, rep.RoundTrip, err = b.PassWithCeiling(ctx, p, k); err != nil {
		return rep, err
	}
	rep.Reproven = b.Reproven - rep.Reproven
	return rep, nil
}

// ProofRun is one proofs benchmark over one log, across the stores opened
// on it one after another (a cold pass after a restart, then another, ...):
// it remembers which runs a pass has proven, so that no measured proof is
// of a run proven before in the same benchmark, on any store, and which
// the server's or the kernel's caches could hold for that reason alone.
// Measured passes prove runs at odd log indexes, each once, in a random
// order; Serve proves runs at even ones. Not safe for concurrent use.
type ProofRun struct {
	proofBench
	odd  []int // odd log indexes in a random order; next is the cursor
	next int
	// Reproven counts measured inclusion proofs of runs proven before,
	// taken once every odd run had been: a benchmark that asks for more
	// proofs than the log has odd runs.
	Reproven int
}

// NewProofRun starts a benchmark over the log of runs (run i at log index
// i), whose nodes tree holds, at size with root. seed picks the runs and
// sizes (0: one of its own).
func NewProofRun(runs []store.RunID, tree log.NodeReader, size uint64, root log.Hash, seed uint64) *ProofRun {
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r := &ProofRun{proofBench: proofBench{runs: runs, tree: tree, size: size, root: root, rng: rand.New(rand.NewPCG(seed, 2))}}
	r.odd = make([]int, len(runs)/2)
	for i := range r.odd {
		r.odd[i] = 2*i + 1
	}
	r.rng.Shuffle(len(r.odd), func(i, j int) { r.odd[i], r.odd[j] = r.odd[j], r.odd[i] })
	return r
}

// unproven is the next odd run no pass has proven (any run, counted in
// Reproven, once there is none).
func (r *ProofRun) unproven() int {
	if r.next < len(r.odd) {
		r.next++
		return r.odd[r.next-1]
	}
	r.Reproven++
	return r.rng.IntN(len(r.runs))
}

// Pass measures k inclusion proofs of runs never proven before in this
// benchmark, then k consistency proofs from random older sizes, on p.
func (r *ProofRun) Pass(ctx context.Context, p Prover, k int) (inclusion, consistency ProofLatency, err error) {
	r.p = p
	r.pick = r.unproven
	if inclusion, err = r.inclusions(ctx, k); err != nil {
		return
	}
	consistency, err = r.consistencies(ctx, k)
	return
}

// PassWithCeiling is Pass with the store's cheapest statement (the
// ceiling, see ProofReport.RoundTrip) timed after each proof when p can
// run it, as the second pass of ProofBenchWith does: on a loaded machine
// it says how much of a p99 the scheduler took. ceiling is zero when p
// cannot.
func (r *ProofRun) PassWithCeiling(ctx context.Context, p Prover, k int) (inclusion, consistency, ceiling ProofLatency, err error) {
	rt, ok := p.(roundTripper)
	if !ok {
		inclusion, consistency, err = r.Pass(ctx, p, k)
		return
	}
	trips := &timing{wall: make([]time.Duration, 0, 2*k), cpu: make([]time.Duration, 0, 2*k)}
	r.ceiling = func() (time.Duration, error) {
		err := trips.measure(func() error { return rt.RoundTrip(ctx) })
		return trips.wall[len(trips.wall)-1], err
	}
	defer func() { r.ceiling = nil }()
	if inclusion, consistency, err = r.Pass(ctx, p, k); err != nil {
		return
	}
	ceiling = ProofLatency{Proofs: len(trips.wall), StoreReads: -1, RoundTrips: 1}
	ceiling.P50us, ceiling.P99us = quantiles(trips.wall)
	if processCPU() > 0 {
		ceiling.CPUP50us, ceiling.CPUP99us = quantiles(trips.cpu)
	}
	return
}

// Serve has p serve n inclusion proofs of runs at even log indexes,
// unmeasured (ProofOptions.Served), and returns how long they took.
func (r *ProofRun) Serve(ctx context.Context, p Prover, n int) (time.Duration, error) {
	t0 := time.Now()
	r.p = p
	r.pick = func() int { return 2 * r.rng.IntN((len(r.runs)+1)/2) }
	if _, err := r.inclusions(ctx, n); err != nil {
		return 0, fmt.Errorf("served before the second pass: %w", err)
	}
	return time.Since(t0), nil
}

type proofBench struct {
	p    Prover
	runs []store.RunID
	tree log.NodeReader
	size uint64
	root log.Hash
	rng  *rand.Rand
	pick func() int // the index of the next run to prove
	// ceiling, when set, runs one timed round trip of the store's cheapest
	// statement; each proof is followed by one.
	ceiling func() (time.Duration, error)
}

// timing is the wall and CPU time of each proof of one pass, and the
// counters around it.
type timing struct {
	wall, cpu []time.Duration
	gc0       uint32
	cache0    log.CacheStats
	trips0    uint64
	nodes     int
	// hits0 and reads0 are the server's buffer counts at the start (bufErr:
	// it could not say).
	hits0, reads0 uint64
	bufErr        error
	// readTime0 is the server's read time at the start (readTimed false:
	// not timed).
	readTime0 time.Duration
	readTimed bool
	// samples is each proof's breakdown (see tail.go), tracer the
	// store's, if it has one.
	samples []sample
	gc      *gcClock
	tracer  Tracer
}

func (b *proofBench) start(ctx context.Context, k int) *timing {
	t := &timing{wall: make([]time.Duration, 0, k), cpu: make([]time.Duration, 0, k), samples: make([]sample, 0, k), gc: newGCClock()}
	t.tracer, _ = b.p.(Tracer)
	runtime.GC() // start each pass with no garbage of the last one
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.gc0 = ms.NumGC
	if c, ok := b.p.(cacheReporter); ok {
		t.cache0 = c.NodeCacheStats()
	}
	if r, ok := b.p.(tripReporter); ok {
		t.trips0 = r.ProofRoundTrips()
	}
	if r, ok := b.p.(bufferReporter); ok {
		t.hits0, t.reads0, t.bufErr = r.ServerBuffers(ctx)
	}
	if r, ok := b.p.(readTimer); ok && t.bufErr == nil {
		var err error
		t.readTime0, t.readTimed, err = r.ServerReadTime(ctx)
		t.readTimed = t.readTimed && err == nil
	}
	return t
}

// measure runs one proof, timing it.
func (t *timing) measure(fn func() error) error {
	var g0 uint64
	var p0 time.Duration
	if t.gc != nil {
		g0, p0 = t.gc.read()
	}
	if t.tracer != nil {
		t.tracer.BeginTrace()
	}
	c0 := processCPU()
	t0 := time.Now()
	err := fn()
	wall := time.Since(t0)
	cpu := processCPU() - c0
	t.wall = append(t.wall, wall)
	t.cpu = append(t.cpu, cpu)
	if t.gc != nil {
		s := sample{wall: wall, cpu: cpu}
		g1, p1 := t.gc.read()
		s.gcs, s.gcPause = g1-g0, p1-p0
		if t.tracer != nil {
			s.trace, s.traced = t.tracer.EndTrace(), true
		}
		t.samples = append(t.samples, s)
	}
	return err
}

// ceilingAfter notes the wall time of the ceiling's round trip timed
// right after the last proof.
func (t *timing) ceilingAfter(d time.Duration) {
	if len(t.samples) > 0 {
		t.samples[len(t.samples)-1].ceiling = d
	}
}

func (b *proofBench) finish(ctx context.Context, t *timing, k int) ProofLatency {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := ProofLatency{Proofs: k, NodeReads: float64(t.nodes) / float64(k), StoreReads: -1, RoundTrips: -1, GCs: ms.NumGC - t.gc0}
	out.Tail = tail(t.samples)
	out.P50us, out.P99us = quantiles(t.wall)
	if processCPU() > 0 {
		out.CPUP50us, out.CPUP99us = quantiles(t.cpu)
	}
	if c, ok := b.p.(cacheReporter); ok {
		out.StoreReads = float64(c.NodeCacheStats().Misses-t.cache0.Misses) / float64(k)
	}
	if r, ok := b.p.(tripReporter); ok {
		out.RoundTrips = float64(r.ProofRoundTrips()-t.trips0) / float64(k)
	}
	out.ServerPages, out.ServerReads, out.ServerReadUs = -1, -1, -1
	if r, ok := b.p.(bufferReporter); ok && t.bufErr == nil {
		if hits, reads, err := r.ServerBuffers(ctx); err == nil && hits >= t.hits0 && reads >= t.reads0 {
			out.ServerPages = float64(hits-t.hits0+reads-t.reads0) / float64(k)
			out.ServerReads = float64(reads-t.reads0) / float64(k)
		}
	}
	if r, ok := b.p.(readTimer); ok && t.readTimed {
		if d, on, err := r.ServerReadTime(ctx); err == nil && on && d >= t.readTime0 {
			out.ServerReadUs = float64((d - t.readTime0).Nanoseconds()) / 1000 / float64(k)
		}
	}
	return out
}

func (b *proofBench) inclusions(ctx context.Context, k int) (ProofLatency, error) {
	t := b.start(ctx, k)
	counter := &countingReader{r: b.tree}
	for range k {
		i := b.pick()
		var inc *store.Inclusion
		err := t.measure(func() (err error) {
			inc, err = b.p.InclusionProof(ctx, b.runs[i])
			return err
		})
		if err != nil {
			return ProofLatency{}, fmt.Errorf("inclusion proof of run %d: %w", i, err)
		}
		if err := b.roundTrip(t); err != nil {
			return ProofLatency{}, err
		}
		if inc == nil || inc.Index != uint64(i) || inc.Size != b.size {
			return ProofLatency{}, fmt.Errorf("inclusion proof of run %d: got %+v", i, inc)
		}
		if err := log.VerifyInclusion(log.Hash(inc.Leaf), inc.Index, inc.Size, hashes(inc.Proof), b.root); err != nil {
			return ProofLatency{}, fmt.Errorf("inclusion proof of run %d: %w", i, err)
		}
		if _, err := log.InclusionProof(ctx, counter, inc.Index, b.size); err != nil {
			return ProofLatency{}, err
		}
	}
	t.nodes = counter.take()
	return b.finish(ctx, t, k), nil
}

func (b *proofBench) consistencies(ctx context.Context, k int) (ProofLatency, error) {
	t := b.start(ctx, k)
	counter := &countingReader{r: b.tree}
	for range k {
		old := 1 + b.rng.Uint64N(b.size)
		var proof []store.Digest
		err := t.measure(func() (err error) {
			proof, err = b.p.ConsistencyProof(ctx, old, b.size)
			return err
		})
		if err != nil {
			return ProofLatency{}, fmt.Errorf("consistency proof %d..%d: %w", old, b.size, err)
		}
		if err := b.roundTrip(t); err != nil {
			return ProofLatency{}, err
		}
		oldRoot, err := log.Root(ctx, b.tree, old)
		if err != nil {
			return ProofLatency{}, err
		}
		if err := log.VerifyConsistency(old, b.size, oldRoot, b.root, hashes(proof)); err != nil {
			return ProofLatency{}, fmt.Errorf("consistency proof %d..%d: %w", old, b.size, err)
		}
		if _, err := log.ConsistencyProof(ctx, counter, old, b.size); err != nil {
			return ProofLatency{}, err
		}
	}
	t.nodes = counter.take()
	return b.finish(ctx, t, k), nil
}

// roundTrip runs the ceiling's statement once, if there is one, after a
// proof measured in t.
func (b *proofBench) roundTrip(t *timing) error {
	if b.ceiling == nil {
		return nil
	}
	d, err := b.ceiling()
	if err != nil {
		return fmt.Errorf("round trip (the ceiling): %w", err)
	}
	t.ceilingAfter(d)
	return nil
}

// quantiles is the p50 and p99 of ds in microseconds; it sorts ds.
func quantiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		return float64(ds[int(p*float64(len(ds)-1))].Nanoseconds()) / 1000
	}
	return q(0.50), q(0.99)
}

type countingReader struct {
	r log.NodeReader
	n int
}

func (c *countingReader) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]log.Hash, error) {
	c.n += len(ids)
	return c.r.ReadNodes(ctx, ids)
}

func (c *countingReader) take() int { n := c.n; c.n = 0; return n }

func hashes(ds []store.Digest) []log.Hash {
	out := make([]log.Hash, len(ds))
	for i, d := range ds {
		out[i] = log.Hash(d)
	}
	return out
}
