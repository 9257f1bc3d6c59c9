package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

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
	// SQLiteSkipped: --proofs-sqlite=false; only Postgres is measured.
	SQLiteSkipped bool `json:"sqlite_skipped,omitempty"`
	// ColdStarts are the first passes of --proofs-cold, before the rest.
	ColdStarts []coldStart `json:"cold_starts,omitempty"`
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

// proofsColdOptions are the flags of --proofs' cold starts.
type proofsColdOptions struct {
	cold    bool   // --proofs-cold
	restart string // --proofs-pg-restart
	sqlite  bool   // --proofs-sqlite
}

func (x *proofsColdOptions) flags(f *pflag.FlagSet) {
	f.BoolVar(&x.cold, "proofs-cold", false, "with --proofs, first measure cold starts: drop the kernel's page cache (root, Linux), restart PostgreSQL (--proofs-pg-restart) and reopen the store, once with its warm off and once on")
	f.StringVar(&x.restart, "proofs-pg-restart", "", "with --proofs-cold, a shell command that restarts the PostgreSQL server of --proofs-postgres and returns once it accepts connections (interrupting the bench while it runs may leave the server stopped)")
	f.BoolVar(&x.sqlite, "proofs-sqlite", true, "with --proofs, measure the SQLite store (false: PostgreSQL only)")
}

func (x *proofsColdOptions) validate(o *benchOptions) error {
	if !x.sqlite && o.proofsPG == "" {
		return usageErrorf("--proofs-sqlite=false needs --proofs-postgres")
	}
	if x.cold && o.proofs == 0 {
		return usageErrorf("--proofs-cold needs --proofs")
	}
	if x.restart != "" && (!x.cold || o.proofsPG == "") {
		return usageErrorf("--proofs-pg-restart needs --proofs-cold and --proofs-postgres")
	}
	return nil
}

// coldStart is a first pass of proofs from a store opened after the
// server's restart and the kernel's page cache dropped, as after a reboot.
type coldStart struct {
	// Warm is whether the store warmed its proofs' pages (postgres.Store's
	// warm at open); the first pass ran while it did.
	Warm bool `json:"warm"`
	// WaitedWarm is whether the first pass began only once the warm had
	// ended (SQLite's cold starts; PostgreSQL's first pass runs during it).
	WaitedWarm bool `json:"waited_warm,omitempty"`
	// Restarted is whether the server was restarted first (PostgreSQL:
	// --proofs-pg-restart), so that its shared_buffers were empty;
	// CacheDropped whether the kernel's page cache was dropped. A reason
	// is given for each that was not.
	Restarted    bool   `json:"restarted"`
	RestartError string `json:"restart_error,omitempty"`
	CacheDropped bool   `json:"cache_dropped"`
	DropError    string `json:"drop_error,omitempty"`
	// Inclusion and Consistency are the first pass, from the store just
	// opened.
	Inclusion   benchjournal.ProofLatency `json:"inclusion"`
	Consistency benchjournal.ProofLatency `json:"consistency"`
	// With the warm: how long it took (from the store's open), how it read
	// the indexes, how many pages, whether it ended before the first pass
	// did, why it stopped short if it did, and a second pass right after it.
	WarmSeconds      float64                    `json:"warm_seconds,omitempty"`
	WarmReadSeconds  float64                    `json:"warm_read_seconds,omitempty"` // of which reading the indexes and tables, before the node cache's fill
	WarmMethod       string                     `json:"warm_method,omitempty"`
	WarmPages        int64                      `json:"warm_pages,omitempty"`
	WarmBuffered     int64                      `json:"warm_buffered,omitempty"`
	WarmFallback     string                     `json:"warm_fallback,omitempty"`
	WarmError        string                     `json:"warm_error,omitempty"`
	WarmEndedInPass  bool                       `json:"warm_ended_in_pass,omitempty"`
	AfterInclusion   *benchjournal.ProofLatency `json:"after_warm_inclusion,omitempty"`
	AfterConsistency *benchjournal.ProofLatency `json:"after_warm_consistency,omitempty"`
	AfterCeiling     *benchjournal.ProofLatency `json:"after_warm_ceiling,omitempty"` // the size read, timed after each of those proofs
	// Reproven is how many of this cold start's measured inclusion proofs
	// were of runs proven before (the bench ran out of runs never proven).
	Reproven              int `json:"reproven,omitempty"`
	LoadBefore, LoadAfter float64
}

// benchProofs builds a journal of n sealed runs in dir with the bulk path
// and measures proofs from it through the store; with a pgDSN, the same
// on a PostgreSQL tenant after.
func benchProofs(ctx context.Context, dir string, n, k, served int, pgDSN string, keep bool, x proofsColdOptions) (*proofsReport, error) {
	o := benchjournal.ProofOptions{Samples: k, Served: served}
	if !x.sqlite {
		pg, err := benchProofsPostgres(ctx, pgDSN, n, o, keep, x)
		return &proofsReport{SQLiteSkipped: true, Postgres: pg}, err
	}
	path := filepath.Join(dir, fmt.Sprintf("proofs-%d.db", n))
	defer benchappend.RemoveDB(path)
	start := time.Now()
	runs, tree, err := sqlite.CreateSealedLog(ctx, path, n)
	if err != nil {
		return nil, fmt.Errorf("build a log of %d sealed runs: %w", n, err)
	}
	build := time.Since(start).Seconds()
	var colds []coldStart
	if x.cold {
		// SQLite has no server: a cold start is the file's pages out of
		// the kernel's cache and a store just opened.
		root, err := log.Root(ctx, tree, uint64(n))
		if err != nil {
			return nil, err
		}
		run := benchjournal.NewProofRun(runs, tree, uint64(n), root, 0)
		o.Run = run
		for _, warm := range []bool{false, true} {
			c, err := sqliteColdStart(ctx, path, k, run, warm)
			if err != nil {
				return nil, err
			}
			colds = append(colds, c)
		}
	}
	// The steady state's store does not warm: its passes measure the
	// proofs, not a background read beside them.
	s, err := sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger(), NoWarm: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rep, err := measureProofs(ctx, s, runs, tree, n, o, build)
	if err != nil {
		return rep, err
	}
	rep.ColdStarts = colds
	if pgDSN == "" {
		return rep, nil
	}
	rep.Postgres, err = benchProofsPostgres(ctx, pgDSN, n, benchjournal.ProofOptions{Samples: k, Served: served}, keep, x)
	return rep, err
}

// sqliteColdStart drops the kernel's page cache, opens the store at path
// with its warm on or off and measures a first pass of k proofs of each
// kind; with the warm, only once it has ended (as "journal serve
// --wait-warm" answers its first proofs).
func sqliteColdStart(ctx context.Context, path string, k int, run *benchjournal.ProofRun, warm bool) (coldStart, error) {
	c := coldStart{Warm: warm, WaitedWarm: warm, LoadBefore: loadAverage()}
	defer func(before int) { c.Reproven = run.Reproven - before }(run.Reproven)
	c.CacheDropped, c.DropError = dropText(dropPageCache())
	s, err := sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger(), NoWarm: !warm})
	if err != nil {
		return c, err
	}
	defer s.Close()
	if warm {
		w, err := s.WaitWarm(ctx)
		if err != nil {
			return c, err
		}
		c.WarmSeconds, c.WarmReadSeconds = w.Took.Seconds(), w.Indexes.Seconds()
		c.WarmMethod, c.WarmPages = w.Method, w.Pages
		if w.Err != nil {
			c.WarmError = w.Err.Error()
		}
	}
	if !warm {
		if c.Inclusion, c.Consistency, err = run.Pass(ctx, s, k); err != nil {
			return c, err
		}
	} else {
		// The size read timed after each proof is the ceiling beside the
		// pass: on a loaded machine it says how much of a p99 the
		// scheduler took.
		var ceil benchjournal.ProofLatency
		if c.Inclusion, c.Consistency, ceil, err = run.PassWithCeiling(ctx, s, k); err != nil {
			return c, err
		}
		c.AfterCeiling = &ceil
	}
	c.LoadAfter = loadAverage()
	return c, nil
}

// dropText is dropPageCache's outcome as coldStart's fields.
func dropText(err error) (bool, string) {
	if err != nil {
		return false, "could not drop the kernel's page cache: " + err.Error()
	}
	return true, ""
}

// pgProofStore is a PostgreSQL store of the proofs benchmark on a traced
// pool of its own, which close closes.
type pgProofStore struct {
	tracedStore
	pool *pgxpool.Pool
}

func (p pgProofStore) close() {
	p.Store.Close()
	p.pool.Close()
}

// openProofStore opens tenant proofs<n> of schema on a pool of its own
// whose statements are traced, so that the report can say where the
// slowest proofs spent their time (benchjournal.ProofTail).
func openProofStore(ctx context.Context, dsn, schema string, n int, noWarm bool) (pgProofStore, error) {
	cfg, err := postgres.PoolConfig(dsn, 0)
	if err != nil {
		return pgProofStore{}, usageErrorf("--proofs-postgres: %v", err)
	}
	tr := &postgres.StatementTracer{}
	cfg.ConnConfig.Tracer = tr // and the pool's acquire tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return pgProofStore{}, fmt.Errorf("--proofs-postgres: connect: %w", err)
	}
	st, err := postgres.New(ctx, pool, postgres.Options{Schema: schema, Tenant: fmt.Sprintf("proofs%d", n), Logger: quietLogger(), NoWarm: noWarm})
	if err != nil {
		pool.Close()
		return pgProofStore{}, err
	}
	return pgProofStore{tracedStore{st, tr}, pool}, nil
}

// benchProofsPostgres builds the same log in tenant proofs<n> of schema
// proofsSchema, or reuses it if a kept earlier run built it there (its
// root is checked), measures, and drops the schema unless keep. With
// x.cold it first measures two cold starts, the warm off and on.
func benchProofsPostgres(ctx context.Context, dsn string, n int, o benchjournal.ProofOptions, keep bool, x proofsColdOptions) (*proofsReport, error) {
	schema := proofsSchema
	if v := os.Getenv("RUNSEAL_BENCH_PROOFS_SCHEMA"); v != "" {
		schema = v
	}
	// The log is built (or found) by a store whose warm is off: its
	// measured passes come after, from stores of their own.
	s, err := openProofStore(ctx, dsn, schema, n, true)
	if err != nil {
		return nil, err
	}
	if !keep {
		defer func() {
			p, err := pgxpool.New(context.WithoutCancel(ctx), dsn)
			if err == nil {
				p.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
				p.Close()
			}
		}()
	}
	start := time.Now()
	l, err := s.CreateSealedLog(ctx, n)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("build a log of %d sealed runs on PostgreSQL: %w", n, err)
	}
	build := time.Since(start).Seconds()
	run := benchjournal.NewProofRun(l.Runs, l.Tree, uint64(n), l.Root, 0)
	o.Run = run
	var colds []coldStart
	if x.cold {
		s.close()
		for _, warm := range []bool{false, true} {
			c, err := pgColdStart(ctx, dsn, schema, n, o.Samples, run, warm, x.restart)
			if err != nil {
				return nil, err
			}
			colds = append(colds, c)
		}
		if s, err = openProofStore(ctx, dsn, schema, n, false); err != nil {
			return nil, err
		}
		if _, err := s.WaitWarm(ctx); err != nil {
			s.close()
			return nil, err
		}
		o.NoFirstPass = true
	}
	defer s.close()
	rep, err := measureProofs(ctx, s, l.Runs, l.Tree, n, o, build)
	if rep != nil {
		rep.ColdStarts = colds
	}
	return rep, err
}

// pgColdStart restarts the server with restart (if any), drops the
// kernel's page cache, opens the store with its warm on or off and
// measures a first pass, then, with the warm, waits for it and measures
// another.
func pgColdStart(ctx context.Context, dsn, schema string, n, k int, run *benchjournal.ProofRun, warm bool, restart string) (coldStart, error) {
	c := coldStart{Warm: warm, LoadBefore: loadAverage()}
	defer func(before int) { c.Reproven = run.Reproven - before }(run.Reproven)
	if restart == "" {
		c.RestartError = "not restarted (no --proofs-pg-restart): shared_buffers kept what they held"
	} else if out, err := exec.CommandContext(ctx, "sh", "-c", restart).CombinedOutput(); err != nil {
		return c, fmt.Errorf("--proofs-pg-restart: %w: %s", err, tailText(out, 300))
	} else {
		c.Restarted = true
	}
	c.CacheDropped, c.DropError = dropText(dropPageCache())
	s, err := openProofStore(ctx, dsn, schema, n, !warm)
	if err != nil {
		return c, err
	}
	defer s.close()
	// The warm started inside the open, so it ended by opened+Took at the
	// latest: "within the first pass" is claimed only when that is before
	// the pass ended.
	opened := time.Now()
	if c.Inclusion, c.Consistency, err = run.Pass(ctx, s, k); err != nil {
		return c, err
	}
	passEnd := time.Now()
	if !warm {
		c.LoadAfter = loadAverage()
		return c, nil
	}
	w, err := s.WaitWarm(ctx)
	if err != nil {
		return c, err
	}
	c.WarmSeconds, c.WarmReadSeconds = w.Took.Seconds(), w.Indexes.Seconds()
	c.WarmMethod, c.WarmPages, c.WarmBuffered = w.Method, w.Pages, w.Buffered
	if w.Fallback != nil {
		c.WarmFallback = w.Fallback.Error()
	}
	if w.Err != nil {
		c.WarmError = w.Err.Error()
	}
	c.WarmEndedInPass = opened.Add(w.Took).Before(passEnd)
	inc, cons, ceil, err := run.PassWithCeiling(ctx, s, k)
	if err != nil {
		return c, err
	}
	c.AfterInclusion, c.AfterConsistency, c.AfterCeiling = &inc, &cons, &ceil
	c.LoadAfter = loadAverage()
	return c, nil
}

// tailText is the last max bytes of a command's output, for an error.
func tailText(out []byte, max int) string {
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return strings.TrimSpace(string(out))
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
	if !p.SQLiteSkipped {
		printProofTable(w, "SQLite", p)
	}
	if p.Postgres != nil {
		printProofTable(w, "PostgreSQL", p.Postgres)
	}
}

func printProofTable(w io.Writer, backend string, p *proofsReport) {
	printColdStarts(w, backend, p.ColdStarts)
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
	}{{"inclusion, first pass", p.Cold.Inclusion}, {"consistency, first pass", p.Cold.Consistency}, {"inclusion", p.Inclusion}, {"consistency", p.Consistency}} {
		if l.Proofs == 0 {
			continue // no first pass: the cold starts above were
		}
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
	}{{"inclusion, first pass", p.Cold.Inclusion}, {"consistency, first pass", p.Cold.Consistency}, {"inclusion", p.Inclusion}, {"consistency", p.Consistency}} {
		if t := l.Tail; t != nil {
			fmt.Fprintf(w, "where the time went, %s: slowest 1%% %s; all %s\n", l.name, shareText(t.Slowest), shareText(t.All))
		}
	}
	if p.Reproven > 0 {
		fmt.Fprintf(w, "%d of the measured inclusion proofs were of runs proven before (too few runs for the passes)\n", p.Reproven)
	}
	if p.Served > 0 {
		fmt.Fprintf(w, "before the second pass the store served %d inclusion proofs of other runs, unmeasured, in %.1fs\n", p.Served, p.ServedSeconds)
	}
	if p.WarmSeconds > 0 {
		fmt.Fprintf(w, "node cache filled in %.1fs between the passes\n", p.WarmSeconds)
	}
	fmt.Fprintf(w, "target p99 <= %d µs (second pass): wall %s, cpu %s\n", targetProofP99us, metText(p.Met), metText(p.CPUMet))
}

// printColdStarts prints --proofs-cold's first passes, each proof kind a
// line: latency, and the server's pages where it counts them.
func printColdStarts(w io.Writer, backend string, cs []coldStart) {
	for _, c := range cs {
		how := "warm off"
		if c.WaitedWarm {
			how = "warm on, first pass after it"
		} else if c.Warm {
			how = "warm on, first pass during it"
		}
		fmt.Fprintf(w, "%s cold start, %s (load %.2f before, %.2f after):\n", backend, how, c.LoadBefore, c.LoadAfter)
		if !c.Restarted && backend == "PostgreSQL" { // SQLite has no server: its cold start is the page cache
			fmt.Fprintf(w, "  NOT a cold server: %s\n", c.RestartError)
		}
		if c.Reproven > 0 {
			fmt.Fprintf(w, "  %d of the measured inclusion proofs were of runs proven before (too few runs for the passes)\n", c.Reproven)
		}
		if !c.CacheDropped {
			fmt.Fprintf(w, "  NOT a cold page cache: %s\n", c.DropError)
		}
		line := func(name string, l benchjournal.ProofLatency) {
			fmt.Fprintf(w, "  %-28s wall p50 %5.0f µs  p99 %6.0f µs  cpu p99 %5.0f µs  GCs %d", name, l.P50us, l.P99us, l.CPUP99us, l.GCs)
			if l.ServerPages >= 0 {
				fmt.Fprintf(w, "  server pages %.2f, not buffered %.2f, read %s µs", l.ServerPages, l.ServerReads, readUsText(l.ServerReadUs))
			}
			fmt.Fprintln(w)
		}
		line("inclusion, first pass", c.Inclusion)
		line("consistency, first pass", c.Consistency)
		if c.Warm {
			ended := "after the first pass"
			if c.WaitedWarm {
				ended = "before the first pass"
			} else if c.WarmEndedInPass {
				ended = "within the first pass"
			}
			pages := ""
			if c.WarmPages >= 0 { // index scans do not count their pages
				pages = fmt.Sprintf(", %d pages", c.WarmPages)
				if backend == "PostgreSQL" {
					pages += fmt.Sprintf(" (%d into shared_buffers)", c.WarmBuffered)
				}
			}
			fmt.Fprintf(w, "  warm: %s%s in %.2fs, then the node cache: %.2fs in all, ended %s", c.WarmMethod, pages, c.WarmReadSeconds, c.WarmSeconds, ended)
			if c.WarmFallback != "" {
				fmt.Fprintf(w, "; not pg_prewarm: %s", c.WarmFallback)
			}
			if c.WarmError != "" {
				fmt.Fprintf(w, "; STOPPED SHORT: %s", c.WarmError)
			}
			fmt.Fprintln(w)
			if c.WaitedWarm && c.AfterCeiling != nil {
				fmt.Fprintf(w, "  %-28s wall p50 %5.0f µs  p99 %6.0f µs  cpu p99 %5.0f µs\n", "ceiling: the size read", c.AfterCeiling.P50us, c.AfterCeiling.P99us, c.AfterCeiling.CPUP99us)
			}
			if c.AfterInclusion != nil {
				line("inclusion, after the warm", *c.AfterInclusion)
				line("consistency, after the warm", *c.AfterConsistency)
				fmt.Fprintf(w, "  %-28s wall p50 %5.0f µs  p99 %6.0f µs  cpu p99 %5.0f µs\n", "ceiling: the size read", c.AfterCeiling.P50us, c.AfterCeiling.P99us, c.AfterCeiling.CPUP99us)
			}
		}
	}
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
