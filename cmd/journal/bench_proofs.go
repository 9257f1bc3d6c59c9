package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/runseal/runseal/internal/benchjournal"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store/sqlite"
)

// proofSamples is how many proofs of each kind --proofs measures.
const proofSamples = 2000

// proofsReport is the --proofs part of "journal bench --json".
type proofsReport struct {
	BuildSeconds float64 `json:"build_seconds"` // writing the log of sealed runs (bulk path, not measured)
	benchjournal.ProofReport
	TargetP99us float64 `json:"target_p99_us"`
	Met         bool    `json:"met"` // both p99s within the target
}

const targetProofP99us = 1000

// benchProofs builds a journal of n sealed runs in dir with the bulk path
// and measures proofs from it through the store.
func benchProofs(ctx context.Context, dir string, n int) (*proofsReport, error) {
	path := filepath.Join(dir, fmt.Sprintf("proofs-%d.db", n))
	defer removeDB(path)
	start := time.Now()
	runs, tree, err := sqlite.CreateSealedLog(ctx, path, n)
	if err != nil {
		return nil, fmt.Errorf("build a log of %d sealed runs: %w", n, err)
	}
	rep := &proofsReport{BuildSeconds: time.Since(start).Seconds(), TargetP99us: targetProofP99us}
	s, err := sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	cp, err := s.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	if cp.Size != uint64(n) {
		return nil, fmt.Errorf("the built log has %d leaves, want %d", cp.Size, n)
	}
	if rep.ProofReport, err = benchjournal.ProofBench(ctx, s, runs, tree, cp.Size, log.Hash(cp.Root), proofSamples); err != nil {
		return nil, err
	}
	rep.Met = rep.Inclusion.P99us <= targetProofP99us && rep.Consistency.P99us <= targetProofP99us
	return rep, nil
}

func printProofs(w io.Writer, p *proofsReport) {
	fmt.Fprintf(w, "proofs at %d sealed runs (log built in %.1fs):\n", p.Size, p.BuildSeconds)
	for _, l := range []struct {
		name         string
		ProofLatency benchjournal.ProofLatency
	}{{"inclusion", p.Inclusion}, {"consistency", p.Consistency}} {
		fmt.Fprintf(w, "  %-11s p50 %7.0f µs  p99 %7.0f µs  %5.1f node reads/proof\n", l.name, l.ProofLatency.P50us, l.ProofLatency.P99us, l.ProofLatency.NodeReads)
	}
	fmt.Fprintf(w, "target p99 <= %d µs: %s\n", targetProofP99us, metText(p.Met))
}
