package benchjournal

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// ProofLatency is one kind of proof's figures.
type ProofLatency struct {
	Proofs int     `json:"proofs"`
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	// NodeReads is the mean number of log nodes one proof reads from the
	// store (each one row read), counted on a copy of the same tree.
	NodeReads float64 `json:"node_reads"`
}

// ProofReport is what ProofBench measures at one log size.
type ProofReport struct {
	Size        uint64       `json:"size"`
	Inclusion   ProofLatency `json:"inclusion"`
	Consistency ProofLatency `json:"consistency"`
}

// ProofBench asks p for k inclusion proofs of runs picked at random and k
// consistency proofs from random older sizes to size, one at a time, and
// reports their latency. tree is the same log's nodes (in memory), on which
// it counts the nodes each proof reads. Every proof is checked against
// root, so a fast wrong answer is an error, not a figure.
func ProofBench(ctx context.Context, p Prover, runs []store.RunID, tree log.NodeReader, size uint64, root log.Hash, k int) (ProofReport, error) {
	rep := ProofReport{Size: size}
	rng := rand.New(rand.NewPCG(1, 2))
	counter := &countingReader{r: tree}
	var lats []time.Duration
	for range k {
		i := rng.IntN(len(runs))
		t0 := time.Now()
		inc, err := p.InclusionProof(ctx, runs[i])
		lats = append(lats, time.Since(t0))
		if err != nil {
			return rep, fmt.Errorf("inclusion proof of run %d: %w", i, err)
		}
		if inc == nil || inc.Index != uint64(i) || inc.Size != size {
			return rep, fmt.Errorf("inclusion proof of run %d: got %+v", i, inc)
		}
		if err := log.VerifyInclusion(log.Hash(inc.Leaf), inc.Index, inc.Size, hashes(inc.Proof), root); err != nil {
			return rep, fmt.Errorf("inclusion proof of run %d: %w", i, err)
		}
		if _, err := log.InclusionProof(ctx, counter, inc.Index, size); err != nil {
			return rep, err
		}
	}
	rep.Inclusion = summarize(lats, counter.take(), k)
	lats = lats[:0]
	for range k {
		old := 1 + rng.Uint64N(size)
		t0 := time.Now()
		proof, err := p.ConsistencyProof(ctx, old, size)
		lats = append(lats, time.Since(t0))
		if err != nil {
			return rep, fmt.Errorf("consistency proof %d..%d: %w", old, size, err)
		}
		oldRoot, err := log.Root(ctx, tree, old)
		if err != nil {
			return rep, err
		}
		if err := log.VerifyConsistency(old, size, oldRoot, root, hashes(proof)); err != nil {
			return rep, fmt.Errorf("consistency proof %d..%d: %w", old, size, err)
		}
		if _, err := log.ConsistencyProof(ctx, counter, old, size); err != nil {
			return rep, err
		}
	}
	rep.Consistency = summarize(lats, counter.take(), k)
	return rep, nil
}

func summarize(lats []time.Duration, reads, k int) ProofLatency {
	slices.Sort(lats)
	q := func(p float64) float64 {
		return float64(lats[int(p*float64(len(lats)-1))].Nanoseconds()) / 1000
	}
	return ProofLatency{Proofs: k, P50us: q(0.50), P99us: q(0.99), NodeReads: float64(reads) / float64(k)}
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
