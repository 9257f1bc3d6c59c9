package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/internal/benchappend"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
)

// The measurement is internal/benchappend's; these names keep the other
// bench files (httpbench.go, bench_proofs.go, bench_scale.go) short.
const (
	targetRecordsPerSec = benchappend.TargetRecordsPerSec
	targetRatio         = benchappend.TargetRatio
)

type (
	measurement   = benchappend.Measurement
	benchPoint    = benchappend.Point
	targetVerdict = benchappend.Verdict
)

// benchReport is what "journal bench --json" prints.
type benchReport struct {
	Machine  machineInfo   `json:"machine"`
	Settings benchSettings `json:"settings"`
	// FsyncPerSec is the file system's raw rate of 4 KiB write+fsync, the
	// floor every durable commit stands on.
	FsyncPerSec float64        `json:"fsync_per_sec"`
	Points      []benchPoint   `json:"points,omitempty"`
	Targets     *targetVerdict `json:"targets,omitempty"`
	Scale       []scalePoint   `json:"scale,omitempty"`
	Proofs      *proofsReport  `json:"proofs,omitempty"`
	Restore     *restoreBench  `json:"restore,omitempty"` // bench_restore.go
	Erase       *eraseBench    `json:"erase,omitempty"`   // bench_erase.go
}

type machineInfo struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	NumCPU    int    `json:"num_cpu"`
	GoVersion string `json:"go_version"`
	// Load averages (1 minute) before and after: other work on the
	// machine competes for the same CPUs and disk. -1 where unknown.
	LoadBefore float64 `json:"load_before"`
	LoadAfter  float64 `json:"load_after"`
}

type benchSettings struct {
	Dir             string  `json:"dir"`
	SecondsPerPoint float64 `json:"seconds_per_point"` // per workload, in Slices alternating slices
	Slices          int     `json:"slices"`
	PayloadBytes    int     `json:"payload_bytes"`
	RecordBytes     int     `json:"record_bytes"` // canonical body size of one bench record
	Durability      string  `json:"durability"`
	Sealed          bool    `json:"sealed"` // points carry the journal through store/sealed too
}

type benchOptions struct {
	dir           string
	duration      time.Duration
	concurrency   []int
	batches       []int
	payload       int
	verifyRecords int
	proofs        int
	throughput    bool
	asJSON        bool
	keep          bool
	sealed        bool              // also measure the journal through store/sealed
	pipelined     bool              // also measure the journal with its WAL flush pipelined
	eraseRecords  int               // with sealed: erase a case of this many records (bench_erase.go)
	http          bool              // drive journal serve over loopback instead (httpbench.go)
	serveProfile  string            // with http: the serve child's CPU profile file
	restoreRuns   int               // --restore N (bench_restore.go)
	restorePG     string            // --restore-postgres DSN
	proofsPG      string            // --proofs-postgres DSN (bench_proofs.go)
	proofSamples  int               // proofs of each kind per pass (hidden; tests use few)
	proofServed   int               // inclusion proofs served before the measured pass (bench_proofs.go)
	proofsCold    proofsColdOptions // --proofs-cold and its kin (bench_proofs.go)
	tessera       string            // with http: a Tessera POSIX server binary to measure beside (httpbench.go)
	rounds        int               // with http: saturated rounds per point, journal and peer alternating (httpbench.go)
}

func (a *app) benchCmd() *cobra.Command {
	o := benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure durable append throughput against this machine's SQLite ceiling",
		Long: `Measure the journal on a real file, and in the same run the machine's ceiling.

For each concurrency (--concurrency, one run per appender) and batch size
(--batch, records per append), appenders write for --duration. The report
gives records/s and the p50/p99 latency of one append, beside two ceilings:
plain SQLite inserts of rows of the same size, with the same durability (WAL,
synchronous=FULL), the same rows per call and the same callers, but no chain,
no fence and no index work:

  ceiling          each caller commits its own transaction through one
                   connection: what a store without group commit gets
  ceiling_batched  one writer commits all callers' pending rows in one
                   transaction: the best any batching gets

ratio is journal/ceiling and ratio_batched journal/ceiling_batched. A third
figure explains, and is not judged: keyed/s is ceiling_batched into a table
that also keeps the journal's unique key (tenant, run, seq), and keyed is
keyed/s over batched/s, the share of the batched ceiling that reading runs by
seq leaves any store (with N appenders on N runs, a commit writes about N
leaf pages of that key besides the rows). Targets:
at 64 concurrent single-record appenders at least 5000 records/s, and at
least 0.5 of the batched ceiling at every point (the verdict is judged
against ceiling_batched; the per-caller ratio is printed for reference).

--sealed (or --keyring RING) also measures, at every point and in the same
alternating slices, the journal through the sealing decorator (store/sealed):
every field of a bench record sealed, one key scope per appender's run. The
fresh key ring is in the bench directory, or is the one --keyring names (the
bench then creates one scope per appender in it: use a scratch ring). A
scope's key is made before the measured slices: the figure is the steady
state. Target: sealed at least 0.7 of unsealed at 64 appenders. It then
writes two cases of --erase-records sealed records and times erasing one
with the key ring alone and the other as "journal erase" does (key, then the
recorded act), checking that no record of either changed.

--pipelined also measures, in the same alternating slices, the journal opened
with its WAL flush pipelined (sqlite.Options.PipelineFlush: commits with
synchronous=NORMAL, a flusher fdatasyncs the WAL behind the writer, and every
answer and read waits for a flush that began after the commit). Its rate over
the batched ceiling is printed beside the others and is not judged.

--verify-records N also builds a journal with one run of N records (and one of
N/10) and measures, each in a child process, the wall time and peak RSS of
verify RUN, verify --all, read RUN (every record) and read --from/--limit (a
page deep in the run): flat RSS across sizes is constant memory.

--proofs N builds a log of N sealed runs in the bench's own file (directly,
through a bulk path: no records, every run row, leaf and log node) and
measures 2000 inclusion and 2000 consistency proofs served by the store, each
checked against the checkpoint: latency p50/p99 and node reads per proof.
Target: p99 <= 1 ms. With --proofs-postgres DSN, the same log is built in
tenant proofsN of schema runseal_bench_proofs of that database (or reused,
root-checked, if an earlier run with --keep left it) and measured the same
way, printed after the SQLite figures; the schema is dropped unless --keep.
Beside each, the ceiling: the store's cheapest statement (the log's size),
one round trip, timed alternately with the proofs. Before the second pass the
store serves --proofs-served inclusion proofs of other runs (unmeasured), so
that its buffers are in the state a long-running server keeps, not the one its
node cache's fill just left. --proofs-cold first measures cold starts: the
kernel's page cache dropped (root, Linux; the output says when it could not),
the PostgreSQL server restarted by the --proofs-pg-restart command, and the
store reopened, once with its warm off and once on (a first pass while it
warms, the warm's time, a pass after it). No measured proof is of a run proven
before in the same bench.

--restore N writes an export of N sealed runs (two records each), restores it
into a new SQLite journal, exports that, and restores the export into another
SQLite journal and, with --restore-postgres DSN, a new PostgreSQL tenant; each
step runs in a child process and reports records/s, MB/s and peak RSS,
beside the append rate and ceilings measured before and after the steps.
Targets: restore >= 20,000 records/s, export >= 50 MB/s.

Files go in a fresh directory under --dir (default: the current directory,
which should be on the disk the journal will live on; a tmpfs would measure
memory, not durability) and are removed afterwards unless --keep.`,
		Example: `  journal bench --json
  journal bench --duration 5s --concurrency 1,8,64 --batch 1,16
  journal bench --throughput=false --verify-records 1000000 --json
  journal bench --throughput=false --proofs 1000000
  journal bench --throughput=false --proofs 1000000 --proofs-postgres postgres://localhost/runseal --keep
  journal bench --throughput=false --proofs 1000000 --proofs-cold --proofs-postgres postgres://localhost/runseal --proofs-pg-restart 'systemctl restart postgresql'
  journal bench --throughput=false --restore 1000000 --restore-postgres postgres://localhost/runseal
  journal bench --sealed --batch 1`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if o.duration <= 0 {
				return usageErrorf("--duration must be positive")
			}
			for _, c := range o.concurrency {
				if c < 1 || c > 4096 {
					return usageErrorf("--concurrency %d: must be from 1 to 4096", c)
				}
			}
			for _, b := range o.batches {
				if b < 1 || b > 10000 {
					return usageErrorf("--batch %d: must be from 1 to 10000", b)
				}
			}
			if o.payload < 0 || o.payload > store.MaxRecordBytes/2 {
				return usageErrorf("--payload %d: must be from 0 to %d", o.payload, store.MaxRecordBytes/2)
			}
			if o.verifyRecords < 0 {
				return usageErrorf("--verify-records must not be negative")
			}
			if o.proofs < 0 || o.proofs > 100_000_000 {
				return usageErrorf("--proofs %d: must be from 0 to 100000000", o.proofs)
			}
			if o.proofSamples < 1 {
				return usageErrorf("--proof-samples must be positive")
			}
			if o.proofServed < 0 {
				return usageErrorf("--proofs-served must not be negative")
			}
			if o.proofsPG != "" && o.proofs == 0 {
				return usageErrorf("--proofs-postgres needs --proofs N")
			}
			if err := o.proofsCold.validate(&o); err != nil {
				return err
			}
			if o.http {
				if !cmd.Flags().Changed("concurrency") {
					o.concurrency = []int{64, 512}
				}
				if !cmd.Flags().Changed("payload") {
					o.payload = 100 // a record of about 200 bytes
				}
				return a.benchHTTP(cmd.Context(), o)
			}
			return a.bench(cmd.Context(), o)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", ".", "directory to create the bench files in (a real disk)")
	f.DurationVar(&o.duration, "duration", 3*time.Second, "how long each workload runs")
	f.IntSliceVar(&o.concurrency, "concurrency", []int{1, 8, 64}, "concurrent appenders, one run each")
	f.IntSliceVar(&o.batches, "batch", []int{1, 16}, "records per append")
	f.IntVar(&o.payload, "payload", 256, "bytes of payload per record")
	f.IntVar(&o.verifyRecords, "verify-records", 0, "also measure read/verify/page memory on a run of this many records (0: skip)")
	f.IntVar(&o.restoreRuns, "restore", 0, "also measure export and restore of a journal of this many sealed runs (0: skip)")
	f.StringVar(&o.restorePG, "restore-postgres", "", "with --restore, also restore into a new tenant of this PostgreSQL database")
	f.IntVar(&o.proofs, "proofs", 0, "also measure proofs from a log of this many sealed runs (0: skip)")
	f.IntVar(&o.proofSamples, "proof-samples", proofSamples, "with --proofs, proofs of each kind per pass")
	_ = f.MarkHidden("proof-samples")
	f.IntVar(&o.proofServed, "proofs-served", proofsServed, "with --proofs, inclusion proofs of other runs served unmeasured before the second pass, as a long-running server has")
	f.StringVar(&o.proofsPG, "proofs-postgres", "", "with --proofs, also measure them on a tenant of this PostgreSQL database")
	o.proofsCold.flags(f)
	f.BoolVar(&o.throughput, "throughput", true, "run the throughput points")
	f.BoolVar(&o.pipelined, "pipelined", false, "also measure the journal with its WAL flush pipelined (sqlite.Options.PipelineFlush), beside the batched ceiling; not judged")
	f.BoolVar(&o.sealed, "sealed", false, "also measure the journal through store/sealed (a fresh file key ring, or the one --keyring names)")
	f.IntVar(&o.eraseRecords, "erase-records", 100000, "with --sealed or --keyring: time erasing a case of this many sealed records (0: skip)")
	f.BoolVar(&o.keep, "keep", false, "keep the bench files")
	f.BoolVar(&o.asJSON, "json", false, "print the report as one JSON document")
	f.StringVar(&o.serveProfile, "serve-cpuprofile", "", "with --http, write the server's CPU profile here")
	_ = f.MarkHidden("serve-cpuprofile")
	f.StringVar(&o.tessera, "tessera-posix", "", "with --http, also drive this Tessera POSIX log server binary (its cmd/conformance/posix) with POST /add, same clients, same run")
	f.IntVar(&o.rounds, "rounds", 3, "with --http, saturated rounds per point, journal serve and the peer alternating; medians are reported")
	f.BoolVar(&o.http, "http", false, "drive 'journal serve' on loopback with --concurrency clients (default 64,512), open loop, beside the store's own rate")
	return cmd
}

func (a *app) bench(ctx context.Context, o benchOptions) error {
	dir, err := os.MkdirTemp(o.dir, "runseal-bench-")
	if err != nil {
		return fmt.Errorf("bench directory: %w", err)
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	payload := benchappend.Fields(o.payload)
	recBytes, err := benchappend.RecordBytes(payload)
	if err != nil {
		return err
	}
	cfg := benchappend.Config{Dir: dir, Duration: o.duration, Fields: payload, RecordBytes: recBytes, Pipelined: o.pipelined}
	if o.sealed || a.sealing.spec != "" {
		ring, closeRing, err := a.benchRing(dir)
		if err != nil {
			return err
		}
		defer closeRing()
		cfg.Ring = ring
	}
	rep := benchReport{
		Machine: machineInfo{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadAverage()},
		Settings: benchSettings{Dir: dir, SecondsPerPoint: o.duration.Seconds(), Slices: benchappend.Slices(o.duration), PayloadBytes: o.payload, RecordBytes: recBytes,
			Durability: "WAL, synchronous=FULL", Sealed: cfg.Ring != nil},
	}
	progress := func(format string, args ...any) {
		a.log.Info(fmt.Sprintf(format, args...))
		if isTerminal(a.stderr) {
			fmt.Fprintf(a.stderr, "bench: "+format+"\n", args...)
		}
	}
	if rep.FsyncPerSec, err = benchappend.FsyncRate(dir, time.Second); err != nil {
		return err
	}
	if o.throughput {
		for _, c := range o.concurrency {
			for _, b := range o.batches {
				progress("concurrency %d, batch %d", c, b)
				p, err := benchappend.PointAt(ctx, cfg, c, b)
				if err != nil {
					return fmt.Errorf("bench c=%d b=%d: %w", c, b, err)
				}
				rep.Points = append(rep.Points, p)
			}
		}
		rep.Targets = benchappend.Judge(rep.Points)
	}
	if cfg.Ring != nil && o.eraseRecords > 0 {
		progress("erase a case of %d sealed records", o.eraseRecords)
		if rep.Erase, err = benchErase(ctx, dir, cfg.Ring, o.eraseRecords); err != nil {
			return fmt.Errorf("bench erase: %w", err)
		}
	}
	if o.verifyRecords > 0 {
		if rep.Scale, err = a.benchScale(ctx, dir, o.verifyRecords, payload, progress); err != nil {
			return err
		}
	}
	if o.restoreRuns > 0 {
		if rep.Restore, err = a.benchRestore(ctx, dir, o.restoreRuns, o.restorePG, o.duration, payload, recBytes, progress); err != nil {
			return err
		}
	}
	if o.proofs > 0 {
		progress("proofs from a log of %d sealed runs", o.proofs)
		if rep.Proofs, err = benchProofs(ctx, dir, o.proofs, o.proofSamples, o.proofServed, o.proofsPG, o.keep, o.proofsCold); err != nil {
			return err
		}
	}
	rep.Machine.LoadAfter = loadAverage()
	if o.asJSON {
		return writeJSON(a.stdout, rep)
	}
	printBench(a.stdout, rep)
	return nil
}

// benchRing is the key ring of the sealed workload: the one --keyring
// names, or a fresh file ring in the bench directory.
func (a *app) benchRing(dir string) (keyring.Ring, func() error, error) {
	if a.sealing.spec != "" {
		return openRing(a.sealing.spec)
	}
	r, err := keyring.OpenFile(filepath.Join(dir, "keys"))
	if err != nil {
		return nil, nil, err
	}
	return r, r.Close, nil
}

func printBench(w io.Writer, r benchReport) {
	fmt.Fprintf(w, "%s/%s, %d CPUs, %s, load %.1f -> %.1f; %s; fsync %.0f/s; records of %d bytes; %s per point\n",
		r.Machine.GOOS, r.Machine.GOARCH, r.Machine.NumCPU, r.Machine.GoVersion, r.Machine.LoadBefore, r.Machine.LoadAfter,
		r.Settings.Durability, r.FsyncPerSec, r.Settings.RecordBytes, time.Duration(r.Settings.SecondsPerPoint*float64(time.Second)))
	if len(r.Points) > 0 {
		fmt.Fprintf(w, "%5s %5s %12s %9s %9s %12s %6s %14s %6s %12s %6s", "conc", "batch", "records/s", "p50 µs", "p99 µs", "ceiling/s", "ratio", "batched/s", "ratio", "keyed/s", "keyed")
		if r.Settings.Sealed {
			fmt.Fprintf(w, " %10s %9s %7s", "sealed/s", "p99 µs", "sealed")
		}
		if len(r.Points) > 0 && r.Points[0].Pipelined != nil {
			fmt.Fprintf(w, " %12s %6s", "pipelined/s", "ratio")
		}
		fmt.Fprintln(w)
		for _, p := range r.Points {
			fmt.Fprintf(w, "%5d %5d %12.0f %9.0f %9.0f %12.0f %6.2f %14.0f %6.2f %12.0f %6.2f", p.Concurrency, p.Batch,
				p.Journal.RecordsPerSec, p.Journal.P50us, p.Journal.P99us, p.Ceiling.RecordsPerSec, p.Ratio, p.CeilingBatched.RecordsPerSec, p.RatioBatched,
				p.CeilingKeyed.RecordsPerSec, p.KeyedRatio)
			if p.Sealed != nil {
				fmt.Fprintf(w, " %10.0f %9.0f %7.2f", p.Sealed.RecordsPerSec, p.Sealed.P99us, p.SealedRatio)
			}
			if p.Pipelined != nil {
				fmt.Fprintf(w, " %12.0f %6.2f", p.Pipelined.RecordsPerSec, p.PipelinedRatio)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "per record, this process's CPU µs and bytes written (WAL frames and checkpoints):\n%5s %5s %16s %16s %16s\n", "conc", "batch", "journal", "batched", "keyed")
		for _, p := range r.Points {
			cell := func(m measurement) string {
				return fmt.Sprintf("%.1f / %.0f", m.CPUusPerRecord, m.WrittenBytesPerRecord)
			}
			fmt.Fprintf(w, "%5d %5d %16s %16s %16s\n", p.Concurrency, p.Batch, cell(p.Journal), cell(p.CeilingBatched), cell(p.CeilingKeyed))
		}
		t := r.Targets
		fmt.Fprintf(w, "target %d records/s at 64x1: %.0f (%s); >= %.2f of the batched ceiling at every point: min %.2f (%s); of the per-caller ceiling: min %.2f\n",
			targetRecordsPerSec, t.RecordsPerSecAt64x1, metText(t.RecordsPerSecMet), targetRatio, t.MinRatioBatched, metText(t.RatioBatchedMet), t.MinRatio)
		if t.BelowBatched != "" {
			fmt.Fprintf(w, "below target: %s\n", t.BelowBatched)
		}
		if t.SealedRatioTarget > 0 {
			fmt.Fprintf(w, "sealed >= %.2f of unsealed at 64 appenders: min %.2f (%s)\n", t.SealedRatioTarget, t.MinSealedRatioAt64, metText(t.SealedRatioMet))
		}
	}
	if r.Proofs != nil {
		printProofs(w, r.Proofs)
	}
	if r.Restore != nil {
		printRestoreBench(w, r.Restore)
	}
	if r.Erase != nil {
		printEraseBench(w, r.Erase)
	}
	for _, s := range r.Scale {
		rss := "-"
		if s.PeakRSSMiB > 0 {
			rss = fmt.Sprintf("%.1f MiB", s.PeakRSSMiB)
		}
		fmt.Fprintf(w, "%-28s %9d records: %7.2fs, peak RSS %s\n", s.Op, s.Records, s.Seconds, rss)
	}
}

func metText(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
