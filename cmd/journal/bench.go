package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// Targets the bench checks every point against.
const (
	targetRecordsPerSec = 5000 // at 64 concurrent single-record appenders
	targetRatio         = 0.5  // of the same-durability ceiling, at every point
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
}

// measurement is one workload's result.
type measurement struct {
	Records       uint64  `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	P50us         float64 `json:"p50_us"` // per call: one Append, or one transaction
	P99us         float64 `json:"p99_us"`
}

// benchPoint compares the journal at one (concurrency, batch) with two
// ceilings measured on the same machine in the same run, with the same
// file system, pragmas (WAL, synchronous=FULL), row size, rows per call and
// callers, but no chain, no fence and no index work:
//
//   - ceiling: each caller commits its own transaction through one
//     connection (the shape of a store without group commit);
//   - ceiling_batched: the best batching available to the same callers: one
//     writer commits every caller's pending rows in one transaction (a
//     perfect group commit of plain inserts).
type benchPoint struct {
	Concurrency    int         `json:"concurrency"`
	Batch          int         `json:"batch"`
	Journal        measurement `json:"journal"`
	Ceiling        measurement `json:"ceiling"`
	CeilingBatched measurement `json:"ceiling_batched"`
	Ratio          float64     `json:"ratio"`         // journal / ceiling records/s
	RatioBatched   float64     `json:"ratio_batched"` // journal / ceiling_batched records/s
}

// targetVerdict judges the points. The ratio target is judged against the
// batched ceiling, the fairest one: a journal that only beats callers
// committing one by one has not shown it batches well.
type targetVerdict struct {
	RecordsPerSecAt64x1 float64 `json:"records_per_sec_at_64x1"`
	RecordsPerSecTarget float64 `json:"records_per_sec_target"`
	RecordsPerSecMet    bool    `json:"records_per_sec_met"`
	RatioTarget         float64 `json:"ratio_target"`
	// MinRatio is the lowest journal/ceiling (per-caller commits), for
	// reference only.
	MinRatio        float64 `json:"min_ratio"`
	MinRatioBatched float64 `json:"min_ratio_batched"`
	// RatioMet and RatioBatchedMet both say whether every point reached
	// RatioTarget of ceiling_batched.
	RatioMet        bool   `json:"ratio_met"`
	RatioBatchedMet bool   `json:"ratio_batched_met"`
	BelowBatched    string `json:"below_batched,omitempty"` // the points under the target against ceiling_batched
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
	http          bool   // drive journal serve over loopback instead (httpbench.go)
	serveProfile  string // with http: the serve child's CPU profile file
	tessera       string // with http: a Tessera POSIX server binary to measure beside (httpbench.go)
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

ratio is journal/ceiling and ratio_batched journal/ceiling_batched. Targets:
at 64 concurrent single-record appenders at least 5000 records/s, and at
least 0.5 of the batched ceiling at every point (the verdict is judged
against ceiling_batched; the per-caller ratio is printed for reference).

--verify-records N also builds a journal with one run of N records (and one of
N/10) and measures, each in a child process, the wall time and peak RSS of
verify RUN, verify --all, read RUN (every record) and read --from/--limit (a
page deep in the run): flat RSS across sizes is constant memory.

--proofs N builds a log of N sealed runs in the bench's own file (directly,
through a bulk path: no records, every run row, leaf and log node) and
measures 2000 inclusion and 2000 consistency proofs served by the store, each
checked against the checkpoint: latency p50/p99 and node reads per proof.
Target: p99 <= 1 ms.

Files go in a fresh directory under --dir (default: the current directory,
which should be on the disk the journal will live on; a tmpfs would measure
memory, not durability) and are removed afterwards unless --keep.`,
		Example: `  journal bench --json
  journal bench --duration 5s --concurrency 1,8,64 --batch 1,16
  journal bench --throughput=false --verify-records 1000000 --json
  journal bench --throughput=false --proofs 1000000`,
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
	f.IntVar(&o.proofs, "proofs", 0, "also measure proofs from a log of this many sealed runs (0: skip)")
	f.BoolVar(&o.throughput, "throughput", true, "run the throughput points")
	f.BoolVar(&o.keep, "keep", false, "keep the bench files")
	f.BoolVar(&o.asJSON, "json", false, "print the report as one JSON document")
	f.StringVar(&o.serveProfile, "serve-cpuprofile", "", "with --http, write the server's CPU profile here")
	_ = f.MarkHidden("serve-cpuprofile")
	f.StringVar(&o.tessera, "tessera-posix", "", "with --http, also drive this Tessera POSIX log server binary (its cmd/conformance/posix) with POST /add, same clients, same run")
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
	payload := benchFields(o.payload)
	recBytes, err := benchRecordBytes(payload)
	if err != nil {
		return err
	}
	rep := benchReport{
		Machine: machineInfo{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadAverage()},
		Settings: benchSettings{Dir: dir, SecondsPerPoint: o.duration.Seconds(), Slices: benchSlices(o.duration), PayloadBytes: o.payload, RecordBytes: recBytes,
			Durability: "WAL, synchronous=FULL"},
	}
	progress := func(format string, args ...any) {
		a.log.Info(fmt.Sprintf(format, args...))
		if isTerminal(a.stderr) {
			fmt.Fprintf(a.stderr, "bench: "+format+"\n", args...)
		}
	}
	if rep.FsyncPerSec, err = fsyncRate(dir, time.Second); err != nil {
		return err
	}
	if o.throughput {
		for _, c := range o.concurrency {
			for _, b := range o.batches {
				progress("concurrency %d, batch %d", c, b)
				p, err := benchPointAt(ctx, dir, c, b, o.duration, payload, recBytes)
				if err != nil {
					return fmt.Errorf("bench c=%d b=%d: %w", c, b, err)
				}
				rep.Points = append(rep.Points, p)
			}
		}
		rep.Targets = judge(rep.Points)
	}
	if o.verifyRecords > 0 {
		if rep.Scale, err = a.benchScale(ctx, dir, o.verifyRecords, payload, progress); err != nil {
			return err
		}
	}
	if o.proofs > 0 {
		progress("proofs from a log of %d sealed runs", o.proofs)
		if rep.Proofs, err = benchProofs(ctx, dir, o.proofs); err != nil {
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

// benchSlices is how many alternating slices each workload's time is cut
// into: about one a second, at least 3. A disk's fsync rate, and what other
// work leaves of the CPUs, drift by tens of percent over seconds; measuring
// the journal and its ceilings in turns, not one after the other, spreads
// that drift over all three instead of charging it to one.
func benchSlices(d time.Duration) int { return max(3, int(d/time.Second)) }

// workload is one system under test: a step per worker, and a cleanup.
type workload struct {
	steps []func() (int, error)
	close func()
	acc   sliceResult
}

type sliceResult struct {
	lats    []latencies
	records uint64
	elapsed time.Duration
}

func benchPointAt(ctx context.Context, dir string, c, b int, d time.Duration, fields []byte, recBytes int) (benchPoint, error) {
	p := benchPoint{Concurrency: c, Batch: b}
	var ws []*workload
	defer func() {
		for _, w := range ws {
			w.close()
		}
	}()
	for _, mk := range []func() (*workload, error){
		func() (*workload, error) { return journalWorkload(ctx, dir, c, b, fields) },
		func() (*workload, error) { return ceilingWorkload(ctx, dir, c, b, recBytes, false) },
		func() (*workload, error) { return ceilingWorkload(ctx, dir, c, b, recBytes, true) },
	} {
		w, err := mk()
		if err != nil {
			return p, err
		}
		ws = append(ws, w)
	}
	n := benchSlices(d)
	for range n {
		for _, w := range ws {
			r, err := runSlice(w.steps, d/time.Duration(n))
			if err != nil {
				return p, err
			}
			w.acc.lats = append(w.acc.lats, r.lats...)
			w.acc.records += r.records
			w.acc.elapsed += r.elapsed
		}
	}
	p.Journal, p.Ceiling, p.CeilingBatched = ws[0].acc.summarize(), ws[1].acc.summarize(), ws[2].acc.summarize()
	p.Ratio = ratio(p.Journal.RecordsPerSec, p.Ceiling.RecordsPerSec)
	p.RatioBatched = ratio(p.Journal.RecordsPerSec, p.CeilingBatched.RecordsPerSec)
	return p, nil
}

func ratio(x, y float64) float64 {
	if y == 0 {
		return 0
	}
	return float64(int(x/y*1000+0.5)) / 1000
}

func judge(points []benchPoint) *targetVerdict {
	t := &targetVerdict{RecordsPerSecTarget: targetRecordsPerSec, RatioTarget: targetRatio, MinRatio: -1, MinRatioBatched: -1}
	var below []string
	for _, p := range points {
		if p.Concurrency == 64 && p.Batch == 1 {
			t.RecordsPerSecAt64x1 = p.Journal.RecordsPerSec
			t.RecordsPerSecMet = p.Journal.RecordsPerSec >= targetRecordsPerSec
		}
		if t.MinRatio < 0 || p.Ratio < t.MinRatio {
			t.MinRatio = p.Ratio
		}
		if t.MinRatioBatched < 0 || p.RatioBatched < t.MinRatioBatched {
			t.MinRatioBatched = p.RatioBatched
		}
		if p.RatioBatched < targetRatio {
			below = append(below, fmt.Sprintf("c=%d b=%d at %.2f of batched", p.Concurrency, p.Batch, p.RatioBatched))
		}
	}
	t.RatioBatchedMet = t.MinRatioBatched >= targetRatio
	t.RatioMet = t.RatioBatchedMet
	if len(below) > 0 {
		t.BelowBatched = strings.Join(below, "; ")
	}
	return t
}

func printBench(w io.Writer, r benchReport) {
	fmt.Fprintf(w, "%s/%s, %d CPUs, %s, load %.1f -> %.1f; %s; fsync %.0f/s; records of %d bytes; %s per point\n",
		r.Machine.GOOS, r.Machine.GOARCH, r.Machine.NumCPU, r.Machine.GoVersion, r.Machine.LoadBefore, r.Machine.LoadAfter,
		r.Settings.Durability, r.FsyncPerSec, r.Settings.RecordBytes, time.Duration(r.Settings.SecondsPerPoint*float64(time.Second)))
	if len(r.Points) > 0 {
		fmt.Fprintf(w, "%5s %5s %12s %9s %9s %12s %6s %14s %6s\n", "conc", "batch", "records/s", "p50 µs", "p99 µs", "ceiling/s", "ratio", "batched/s", "ratio")
		for _, p := range r.Points {
			fmt.Fprintf(w, "%5d %5d %12.0f %9.0f %9.0f %12.0f %6.2f %14.0f %6.2f\n", p.Concurrency, p.Batch,
				p.Journal.RecordsPerSec, p.Journal.P50us, p.Journal.P99us, p.Ceiling.RecordsPerSec, p.Ratio, p.CeilingBatched.RecordsPerSec, p.RatioBatched)
		}
		t := r.Targets
		fmt.Fprintf(w, "target %d records/s at 64x1: %.0f (%s); >= %.2f of the batched ceiling at every point: min %.2f (%s); of the per-caller ceiling: min %.2f\n",
			targetRecordsPerSec, t.RecordsPerSecAt64x1, metText(t.RecordsPerSecMet), targetRatio, t.MinRatioBatched, metText(t.RatioBatchedMet), t.MinRatio)
		if t.BelowBatched != "" {
			fmt.Fprintf(w, "below target: %s\n", t.BelowBatched)
		}
	}
	if r.Proofs != nil {
		printProofs(w, r.Proofs)
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

// benchFields is the kind's fields of every bench record.
func benchFields(payload int) []byte {
	return []byte(`{"payload":"` + strings.Repeat("x", payload) + `"}`)
}

// benchRecordBytes is the canonical size of a bench record at a typical seq,
// so the ceiling writes rows of the same size.
func benchRecordBytes(fields []byte) (int, error) {
	raw, err := store.EncodeBody(store.Body{Seq: 100000, Run: store.NewRunID(), Epoch: 1, V: store.RecordVersion, Kind: "BenchStep", Fields: fields})
	if err != nil {
		return 0, err
	}
	return len(raw), nil
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// latencies collects per-call latencies of one worker.
type latencies []time.Duration

func (r sliceResult) summarize() measurement {
	var merged []time.Duration
	for _, l := range r.lats {
		merged = append(merged, l...)
	}
	slices.Sort(merged)
	q := func(p float64) float64 {
		if len(merged) == 0 {
			return 0
		}
		return float64(merged[int(p*float64(len(merged)-1))].Microseconds())
	}
	return measurement{
		Records: r.records, Seconds: r.elapsed.Seconds(),
		RecordsPerSec: float64(int(float64(r.records)/r.elapsed.Seconds() + 0.5)),
		P50us:         q(0.50), P99us: q(0.99),
	}
}

// runSlice runs one step per worker in a loop until d has passed, and
// records every step's latency. The slice lasts until the slowest worker's
// last step returns, so no write in flight is left out of the rate.
func runSlice(steps []func() (int, error), d time.Duration) (sliceResult, error) {
	c := len(steps)
	lats := make([]latencies, c)
	counts := make([]uint64, c)
	errs := make([]error, c)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// At least one step each, however late the goroutine starts.
			for done := false; !done; done = !time.Now().Before(deadline) {
				t0 := time.Now()
				n, err := steps[i]()
				if err != nil {
					errs[i] = err
					return
				}
				lats[i] = append(lats[i], time.Since(t0))
				counts[i] += uint64(n)
			}
		}()
	}
	wg.Wait()
	r := sliceResult{lats: lats, elapsed: time.Since(start)}
	for _, n := range counts {
		r.records += n
	}
	return r, errors.Join(errs...)
}

// journalWorkload appends to the journal: one leased run per worker, as in
// production, so every append pays the fence check.
func journalWorkload(ctx context.Context, dir string, c, b int, fields []byte) (*workload, error) {
	path := filepath.Join(dir, fmt.Sprintf("journal-c%d-b%d.db", c, b))
	s, err := sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	w := &workload{close: func() { s.Close(); removeDB(path) }}
	for range c {
		run := store.NewRunID()
		l, err := s.Acquire(ctx, run, "bench", time.Hour)
		if err != nil {
			w.close()
			return nil, err
		}
		batch := make([]store.Append, b)
		for i := range batch {
			batch[i] = store.Append{Run: run, Kind: "BenchStep", Fields: fields}
		}
		w.steps = append(w.steps, func() (int, error) {
			_, err := s.Append(ctx, l.Epoch, batch)
			return b, err
		})
	}
	return w, nil
}

// ceilingDSN is the journal's own DSN: the same pragmas, nothing else.
func ceilingDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

// ceilingWorkload inserts plain rows of recBytes+64 bytes (the body and its
// two hashes) with the journal's durability and no other work: each worker
// committing its own transactions, or (batched) all workers' pending rows
// committed together by one writer.
func ceilingWorkload(ctx context.Context, dir string, c, b int, recBytes int, batched bool) (*workload, error) {
	path := filepath.Join(dir, fmt.Sprintf("ceiling-c%d-b%d-%v.db", c, b, batched))
	db, err := sql.Open("sqlite", ceilingDSN(path))
	if err != nil {
		return nil, err
	}
	w := &workload{close: func() { db.Close(); removeDB(path) }}
	db.SetMaxOpenConns(1) // one connection, as the journal's writer has
	if _, err := db.ExecContext(ctx, `CREATE TABLE rows(id INTEGER PRIMARY KEY, run TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL)`); err != nil {
		w.close()
		return nil, err
	}
	row := make([]byte, recBytes+64)
	insert := func(tx *sql.Tx, run string, seq *int64, n int) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO rows(run, seq, body) VALUES(?,?,?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for range n {
			*seq++
			if _, err := stmt.ExecContext(ctx, run, *seq, row); err != nil {
				return err
			}
		}
		return nil
	}
	if !batched {
		for range c {
			run, seq := store.NewRunID().String(), int64(0)
			w.steps = append(w.steps, func() (int, error) {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return 0, err
				}
				if err := insert(tx, run, &seq, b); err != nil {
					tx.Rollback()
					return 0, err
				}
				return b, tx.Commit()
			})
		}
		return w, nil
	}
	g := newPlainGroup(ctx, db, insert)
	w.close = func() { g.stop(); db.Close(); removeDB(path) }
	for range c {
		req := &plainReq{run: store.NewRunID().String(), n: b, done: make(chan error, 1)}
		w.steps = append(w.steps, func() (int, error) {
			g.reqs <- req
			return b, <-req.done
		})
	}
	return w, nil
}

// plainGroup is a group commit with nothing else in it: one writer drains
// every pending request into one transaction and one fsync.
type plainGroup struct {
	reqs chan *plainReq
	quit chan struct{}
	done chan struct{}
}

type plainReq struct {
	run  string
	seq  int64
	n    int
	done chan error
}

func newPlainGroup(ctx context.Context, db *sql.DB, insert func(*sql.Tx, string, *int64, int) error) *plainGroup {
	g := &plainGroup{reqs: make(chan *plainReq), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for {
			var group []*plainReq
			select {
			case r := <-g.reqs:
				group = append(group, r)
			case <-g.quit:
				return
			}
		drain:
			for len(group) < 256 {
				select {
				case r := <-g.reqs:
					group = append(group, r)
				default:
					break drain
				}
			}
			err := func() error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				for _, r := range group {
					if err := insert(tx, r.run, &r.seq, r.n); err != nil {
						tx.Rollback()
						return err
					}
				}
				return tx.Commit()
			}()
			for _, r := range group {
				r.done <- err
			}
		}
	}()
	return g
}

func (g *plainGroup) stop() {
	close(g.quit)
	<-g.done
}

func removeDB(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(p)
	}
}

// fsyncRate measures 4 KiB write+fsync pairs per second in dir.
func fsyncRate(dir string, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		if _, err := f.WriteAt(buf, int64(n%64)*4096); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		n++
	}
	return float64(int(float64(n) / time.Since(start).Seconds())), nil
}
