package benchjournal

import (
	"runtime/metrics"
	"slices"
	"time"
)

// Tracer is a Prover that accounts, for each proof, the time its client
// spent waiting for a connection and in statements (sent until the last
// row read), as the PostgreSQL bench's traced pool does. ProofBench calls
// Begin before each measured proof and End after it; with it, a pass's
// Tail says where its slowest proofs spent their time.
type Tracer interface {
	BeginTrace()
	EndTrace() Trace
}

// Trace is what a Tracer saw of one proof.
type Trace struct {
	Acquire    time.Duration // waiting for a pooled connection
	Statements time.Duration // in statements: sent, executed by the server, rows read
	Count      int           // statements
	// FirstUse is whether a statement ran on a connection for the first
	// time (the server parses and plans it, the client prepares it): what
	// a fresh or recycled connection costs.
	FirstUse bool
}

// sample is one measured proof.
type sample struct {
	wall, cpu time.Duration
	gcs       uint64 // GC cycles that ended during the proof
	gcPause   time.Duration
	trace     Trace
	traced    bool
	ceiling   time.Duration // the round trip timed right after it (0: none)
}

// ProofTail breaks down where proofs spent their time: the slowest 1% by
// wall time beside every proof of the pass, so that a p99 can be told
// apart as the client's CPU, its garbage collector, a connection's first
// use, the statement (the server, or the machine's scheduler, which the
// ceiling's round trip timed right after each proof shows), or none of
// those.
type ProofTail struct {
	Slowest ProofShare `json:"slowest_1pct"`
	All     ProofShare `json:"all"`
}

// ProofShare is the mean of one group of proofs.
type ProofShare struct {
	Proofs int     `json:"proofs"`
	WallUs float64 `json:"wall_us"`
	CPUUs  float64 `json:"cpu_us"`
	// StatementUs is time inside statements and AcquireUs waiting for a
	// connection; -1 when the store has no Tracer.
	StatementUs float64 `json:"statement_us"`
	AcquireUs   float64 `json:"acquire_us"`
	// OtherUs is wall time outside both: the client's own work and its
	// waits for a core.
	OtherUs float64 `json:"other_us"`
	// WithGC is the share of proofs during which a GC cycle ended, and
	// GCPauseUs the mean stop-the-world time of those cycles per proof.
	WithGC    float64 `json:"with_gc"`
	GCPauseUs float64 `json:"gc_pause_us"`
	// FirstUse is the share of proofs that ran a statement on a
	// connection for the first time.
	FirstUse float64 `json:"first_use"`
	// CeilingUs is the mean wall time of the ceiling's round trip timed
	// right after each proof (0: none): when it is slow after a slow
	// proof, the machine was, not the proof.
	CeilingUs float64 `json:"ceiling_after_us"`
}

// gcClock reads the GC cycles completed so far and the total
// stop-the-world time of GC, without stopping the world itself.
type gcClock struct{ s []metrics.Sample }

func newGCClock() *gcClock {
	return &gcClock{s: []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/pauses/total/gc:seconds"}}}
}

func (g *gcClock) read() (cycles uint64, pause time.Duration) {
	metrics.Read(g.s)
	if g.s[0].Value.Kind() == metrics.KindUint64 {
		cycles = g.s[0].Value.Uint64()
	}
	if g.s[1].Value.Kind() == metrics.KindFloat64Histogram {
		h := g.s[1].Value.Float64Histogram()
		var sec float64
		for i, n := range h.Counts {
			if n == 0 {
				continue
			}
			// The bucket's lower bound: a histogram does not say more.
			lo := h.Buckets[i]
			if lo < 0 || lo != lo || lo > 1e9 {
				lo = h.Buckets[i+1]
			}
			sec += float64(n) * lo
		}
		pause = time.Duration(sec * 1e9)
	}
	return cycles, pause
}

// tail computes a pass's ProofTail from its samples.
func tail(ss []sample) *ProofTail {
	if len(ss) == 0 {
		return nil
	}
	byWall := slices.Clone(ss)
	slices.SortFunc(byWall, func(a, b sample) int { return int(a.wall - b.wall) })
	n := max(1, len(byWall)/100)
	return &ProofTail{Slowest: share(byWall[len(byWall)-n:]), All: share(ss)}
}

func share(ss []sample) ProofShare {
	out := ProofShare{Proofs: len(ss), StatementUs: -1, AcquireUs: -1}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / float64(len(ss)) }
	var wall, cpu, stmt, acq, pause, ceil time.Duration
	var gcs, first, traced int
	for _, s := range ss {
		wall += s.wall
		cpu += s.cpu
		pause += s.gcPause
		ceil += s.ceiling
		if s.gcs > 0 {
			gcs++
		}
		if s.traced {
			traced++
			stmt += s.trace.Statements
			acq += s.trace.Acquire
			if s.trace.FirstUse {
				first++
			}
		}
	}
	out.WallUs, out.CPUUs, out.GCPauseUs, out.CeilingUs = us(wall), us(cpu), us(pause), us(ceil)
	out.WithGC = float64(gcs) / float64(len(ss))
	out.OtherUs = out.WallUs
	if traced == len(ss) {
		out.StatementUs, out.AcquireUs = us(stmt), us(acq)
		out.OtherUs = out.WallUs - out.StatementUs - out.AcquireUs
		out.FirstUse = float64(first) / float64(len(ss))
	}
	return out
}
