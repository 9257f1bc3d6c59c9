package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/internal/benchappend"
	"github.com/runseal/runseal/internal/benchjournal"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sqlite"
)

// proofSamples is how many proofs of each kind --proofs measures per pass.
const proofSamples = 2000

// proofsServed is how many inclusion proofs of other runs --proofs has the
// store serve, unmeasured, before the second pass (ProofOptions.Served):
// at 10^6 runs, 20,000 proofs touch about three quarters of the leaf pages
// of the indexes a proof reads, and PostgreSQL's buffers settle.
const proofsServed = 20000

// proofsReport is the --proofs part of "journal bench --json".
type proofsReport struct {
	BuildSeconds float64 `json:"build_seconds"` // writing the log of sealed runs (bulk path, not measured)
	benchjournal.ProofReport
	TargetP99us float64 `json:"target_p99_us"`
	Met         bool    `json:"met"` // both wall p99s (second pass) within the target
	// CPUMet is whether both CPU-time p99s are within the target: on a
	// loaded machine a wall p99 measures the scheduler as much as the store.
	CPUMet     bool    `json:"cpu_met"`
	LoadBefore float64 `json:"load_before"` // 1-minute load average
	LoadAfter  float64 `json:"load_after"`
	// Postgres is the same measurement on the PostgreSQL store
	// (--proofs-postgres), run after the SQLite one.
	Postgres *proofsReport `json:"postgres,omitempty"`
}

const targetProofP99us = 1000

// proofsSchema is the PostgreSQL schema --proofs-postgres builds its log
// in, one tenant per size; $RUNSEAL_BENCH_PROOFS_SCHEMA names another (as
// for the package benchmark), so that a log kept for one schema version
// can be measured beside another's on the same server.
const proofsSchema = "runseal_bench_proofs"

// benchProofs builds a journal of n sealed runs in dir with the bulk path
// and measures proofs from it through the store; with a pgDSN, the same
// on a PostgreSQL tenant after.
func benchProofs(ctx context.Context, dir string, n, k, served int, pgDSN string, keep bool) (*proofsReport, error) {
	o := benchjournal.ProofOptions{Samples: k, Served: served}
	path := filepath.Join(dir, fmt.Sprintf("proofs-%d.db", n))
	defer benchappend.RemoveDB(path)
	start := time.Now()
	runs, tree, err := sqlite.CreateSealedLog(ctx, path, n)
	if err != nil {
		return nil, fmt.Errorf("build a log of %d sealed runs: %w", n, err)
	}
	build := time.Since(start).Seconds()
	s, err := sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rep, err := measureProofs(ctx, s, runs, tree, n, o, build)
	if err != nil || pgDSN == "" {
		return rep, err
	}
	rep.Postgres, err = benchProofsPostgres(ctx, pgDSN, n, o, keep)
	return rep, err
}

// benchProofsPostgres builds the same log in tenant proofs<n> of schema
// proofsSchema, or reuses it if a kept earlier run built it there (its
// root is checked), measures, and drops the schema unless keep.
func benchProofsPostgres(ctx context.Context, dsn string, n int, o benchjournal.ProofOptions, keep bool) (*proofsReport, error) {
	schema := proofsSchema
	if v := os.Getenv("RUNSEAL_BENCH_PROOFS_SCHEMA"); v != "" {
		schema = v
	}
	// The pool traces its statements, so that the report can say where
	// the slowest proofs spent their time (benchjournal.ProofTail).
	cfg, err := postgres.PoolConfig(dsn, 0)
	if err != nil {
		return nil, usageErrorf("--proofs-postgres: %v", err)
	}
	tr := &postgres.StatementTracer{}
	cfg.ConnConfig.Tracer = tr // and the pool's acquire tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--proofs-postgres: connect: %w", err)
	}
	defer pool.Close()
	st, err := postgres.New(ctx, pool, postgres.Options{Schema: schema, Tenant: fmt.Sprintf("proofs%d", n), Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	s := tracedStore{st, tr}
	if !keep {
		defer s.Pool().Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}
	start := time.Now()
	l, err := s.CreateSealedLog(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("build a log of %d sealed runs on PostgreSQL: %w", n, err)
	}
	return measureProofs(ctx, s, l.Runs, l.Tree, n, o, time.Since(start).Seconds())
}

// measureProofs runs o.Samples proofs of each kind per pass of
// benchjournal.ProofBench on p, whose log holds n sealed runs.
func measureProofs(ctx context.Context, p interface {
	benchjournal.Prover
	Checkpoint(ctx context.Context) (store.Checkpoint, error)
}, runs []store.RunID, tree log.NodeReader, n int, o benchjournal.ProofOptions, build float64) (*proofsReport, error) {
	rep := &proofsReport{BuildSeconds: build, TargetP99us: targetProofP99us, LoadBefore: loadAverage()}
	cp, err := p.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	if cp.Size != uint64(n) {
		return nil, fmt.Errorf("the built log has %d leaves, want %d", cp.Size, n)
	}
	if rep.ProofReport, err = benchjournal.ProofBenchWith(ctx, p, runs, tree, cp.Size, log.Hash(cp.Root), o); err != nil {
		return nil, err
	}
	rep.LoadAfter = loadAverage()
	rep.Met = rep.Inclusion.P99us <= targetProofP99us && rep.Consistency.P99us <= targetProofP99us
	rep.CPUMet = rep.Inclusion.CPUP99us <= targetProofP99us && rep.Consistency.CPUP99us <= targetProofP99us
	return rep, nil
}

func printProofs(w io.Writer, p *proofsReport) {
	printProofTable(w, "SQLite", p)
	if p.Postgres != nil {
		printProofTable(w, "PostgreSQL", p.Postgres)
	}
}

func printProofTable(w io.Writer, backend string, p *proofsReport) {
	fmt.Fprintf(w, "%s: proofs at %d sealed runs (log built or found in %.1fs), load average %.2f before, %.2f after:\n", backend, p.Size, p.BuildSeconds, p.LoadBefore, p.LoadAfter)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	pages := p.Inclusion.ServerPages >= 0 // the server counts its pages (PostgreSQL)
	head := "\twall p50 µs\tp99 µs\tcpu p50 µs\tp99 µs\tnodes/proof\tfrom store\tstatements\tGCs\t"
	if pages {
		head += "server pages\tnot buffered\tread µs\t"
	}
	fmt.Fprintln(tw, head)
	for _, l := range []struct {
		name string
		benchjournal.ProofLatency
	}{{"inclusion, cold cache", p.Cold.Inclusion}, {"consistency, cold cache", p.Cold.Consistency}, {"inclusion", p.Inclusion}, {"consistency", p.Consistency}} {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.2f\t%d\t", l.name, l.P50us, l.P99us, l.CPUP50us, l.CPUP99us, l.NodeReads, l.StoreReads, l.RoundTrips, l.GCs)
		if pages {
			fmt.Fprintf(tw, "%.2f\t%.2f\t%s\t", l.ServerPages, l.ServerReads, readUsText(l.ServerReadUs))
		}
		fmt.Fprintln(tw)
	}
	if c := p.RoundTrip; c.Proofs > 0 {
		fmt.Fprintf(tw, "ceiling: the size read\t%.0f\t%.0f\t%.0f\t%.0f\t\t\t1.00\t\t\n", c.P50us, c.P99us, c.CPUP50us, c.CPUP99us)
	}
	tw.Flush()
	if pages {
		fmt.Fprintln(w, "server pages: table and index pages one proof touched on the server; not buffered: of those, read from outside shared_buffers; read µs: the server's time reading them, per proof (track_io_timing; a cold pass counts the node cache's fill too)")
	}
	for _, l := range []struct {
		name string
		benchjournal.ProofLatency
	}{{"inclusion, cold cache", p.Cold.Inclusion}, {"consistency, cold cache", p.Cold.Consistency}, {"inclusion", p.Inclusion}, {"consistency", p.Consistency}} {
		if t := l.Tail; t != nil {
			fmt.Fprintf(w, "where the time went, %s: slowest 1%% %s; all %s\n", l.name, shareText(t.Slowest), shareText(t.All))
		}
	}
	if p.Served > 0 {
		fmt.Fprintf(w, "before the second pass the store served %d inclusion proofs of other runs, unmeasured, in %.1fs\n", p.Served, p.ServedSeconds)
	}
	if p.WarmSeconds > 0 {
		fmt.Fprintf(w, "node cache filled in %.1fs between the passes\n", p.WarmSeconds)
	}
	fmt.Fprintf(w, "target p99 <= %d µs (second pass): wall %s, cpu %s\n", targetProofP99us, metText(p.Met), metText(p.CPUMet))
}

// tracedStore is the PostgreSQL store with its pool's tracer, which
// benchjournal.ProofBench finds (benchjournal.Tracer).
type tracedStore struct {
	*postgres.Store
	*postgres.StatementTracer
}

// shareText is one ProofShare on a line: the mean wall time and its parts.
func shareText(s benchjournal.ProofShare) string {
	t := fmt.Sprintf("wall %.0f µs (", s.WallUs)
	if s.StatementUs >= 0 {
		t += fmt.Sprintf("statements %.0f, acquire %.0f, ", s.StatementUs, s.AcquireUs)
	}
	if s.OtherUs >= 0 {
		t += fmt.Sprintf("other %.0f)", s.OtherUs)
	} else { // statements of the node cache's fill ran beside the proofs
		t += "with the cache's fill beside)"
	}
	t += fmt.Sprintf(", cpu %.0f µs, GC in %.0f%% (pause %.0f µs)", s.CPUUs, 100*s.WithGC, s.GCPauseUs)
	if s.StatementUs >= 0 {
		t += fmt.Sprintf(", new statement on its connection %.0f%%", 100*s.FirstUse)
	}
	if s.CeilingUs > 0 {
		t += fmt.Sprintf(", round trip right after %.0f µs", s.CeilingUs)
	}
	return t
}

// readUsText is a per-proof server read time, or "-" when not timed.
func readUsText(us float64) string {
	if us < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", us)
}
