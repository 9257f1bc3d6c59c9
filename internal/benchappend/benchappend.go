// Package benchappend measures durable appends to the SQLite journal beside
// the fairest ceilings this machine offers in the same run: plain SQLite
// inserts of rows of the same size, with the same durability (WAL,
// synchronous=FULL), the same rows per call and the same callers, but no
// chain, no fence and no index work. It also measures the journal through
// the sealing decorator (store/sealed) when given a key ring.
//
// Invariants a reader of its figures relies on:
//   - Every workload of a point runs on its own file in the same directory,
//     and the workloads run in alternating slices (Slices), so drift in the
//     disk's fsync rate or in what other work leaves of the CPUs is spread
//     over all of them rather than charged to one.
//   - A slice lasts until the slowest worker's last call returns, so no
//     write in flight is left out of a rate.
//   - The journal's appends are real: each worker holds a lease on a run of
//     its own and every append pays the fence check and is durable before
//     it returns.
//
// cmd/journal's "bench" command is flags, wiring and printing around it.
package benchappend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
)

// Targets every point is judged against.
const (
	// TargetRecordsPerSec is the journal's rate at 64 concurrent
	// single-record appenders.
	TargetRecordsPerSec = 5000
	// TargetRatio is the journal's rate over the batched ceiling's, at
	// every point.
	TargetRatio = 0.5
	// TargetSealedRatio is the sealed journal's rate over the unsealed
	// one's at 64 appenders.
	TargetSealedRatio = 0.7
)

// Measurement is one workload's result at one point.
type Measurement struct {
	Records       uint64  `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	P50us         float64 `json:"p50_us"` // per call: one Append, or one transaction
	P99us         float64 `json:"p99_us"`
	// CPUusPerRecord is this process's CPU time (user and system) during
	// the workload's slices over the records written, and
	// WrittenBytesPerRecord the bytes it passed to write system calls
	// (the WAL's frames and the checkpoints' copies): figures a busy
	// machine disturbs far less than a rate, since other work takes turns
	// on the CPUs but adds to neither. 0 where the platform does not say
	// (written bytes come from Linux's /proc/self/io).
	CPUusPerRecord        float64 `json:"cpu_us_per_record"`
	WrittenBytesPerRecord float64 `json:"written_bytes_per_record"`
}

// Point compares the journal at one (concurrency, batch) with two ceilings
// measured on the same machine in the same run:
//
//   - Ceiling: each caller commits its own transaction through one
//     connection (the shape of a store without group commit);
//   - CeilingBatched: the best batching available to the same callers: one
//     writer commits every caller's pending rows in one transaction (a
//     perfect group commit of plain inserts).
//
// The verdict is judged against CeilingBatched. CeilingKeyed is printed
// beside it to explain, not to judge: the same perfect group commit into a
// table with the journal's unique key (tenant, run, seq), which any store
// that reads a run by seq keeps. With many appenders each on its own run,
// every commit writes one leaf page of that index per run, besides the
// rows: the part of the journal's cost that is the key's, not the chain's.
type Point struct {
	Concurrency    int         `json:"concurrency"`
	Batch          int         `json:"batch"`
	Journal        Measurement `json:"journal"`
	Ceiling        Measurement `json:"ceiling"`
	CeilingBatched Measurement `json:"ceiling_batched"`
	CeilingKeyed   Measurement `json:"ceiling_keyed"`
	Ratio          float64     `json:"ratio"`         // journal / ceiling records/s
	RatioBatched   float64     `json:"ratio_batched"` // journal / ceiling_batched records/s
	// KeyedRatio is ceiling_keyed / ceiling_batched: how much of the
	// batched ceiling the unique key alone leaves.
	KeyedRatio float64 `json:"keyed_ratio"`
	// Sealed is the same journal workload through store/sealed, when the
	// bench was given a key ring; SealedRatio is its rate over Journal's.
	Sealed      *Measurement `json:"sealed,omitempty"`
	SealedRatio float64      `json:"sealed_ratio,omitempty"`
	// Pipelined is the journal with its WAL flush pipelined
	// (sqlite.Options.PipelineFlush), when asked for; PipelinedRatio is its
	// rate over CeilingBatched. It explains and is not judged.
	Pipelined      *Measurement `json:"pipelined,omitempty"`
	PipelinedRatio float64      `json:"pipelined_ratio,omitempty"`
}

// Verdict judges the points. The ratio target is judged against the batched
// ceiling, the fairest one: a journal that only beats callers committing one
// by one has not shown it batches well.
type Verdict struct {
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
	// With sealing measured: the lowest sealed/unsealed ratio at 64
	// appenders, and whether it reached TargetSealedRatio.
	SealedRatioTarget  float64 `json:"sealed_ratio_target,omitempty"`
	MinSealedRatioAt64 float64 `json:"min_sealed_ratio_at_64,omitempty"`
	SealedRatioMet     bool    `json:"sealed_ratio_met,omitempty"`
}

// Config says what to measure at a point.
type Config struct {
	// Dir holds the bench files; it should be on the disk the journal will
	// live on (a tmpfs measures memory, not durability).
	Dir string
	// Duration is each workload's time at a point, cut into Slices(Duration)
	// alternating slices.
	Duration time.Duration
	// Fields is every bench record's kind fields (see Fields); RecordBytes
	// the canonical body size of one record (see RecordBytes), which the
	// ceilings write.
	Fields      []byte
	RecordBytes int
	// Pipelined adds the journal opened with sqlite.Options.PipelineFlush.
	Pipelined bool
	// Ring, if set, adds the journal through store/sealed under this key
	// ring. Each worker's run is its own key scope; the scope's key is made
	// before the measured slices, which measure the steady state.
	Ring keyring.Ring
}

// Slices is how many alternating slices a workload's time d is cut into:
// about one a second, at least 3.
func Slices(d time.Duration) int { return max(3, int(d/time.Second)) }

// Workload is one system under test: a step per worker, and a cleanup.
type Workload struct {
	// Steps are the workers' calls; each returns the records it wrote.
	Steps []func() (int, error)
	Close func()
}

// PointAt measures the journal and its ceilings (and the sealed journal,
// with cfg.Ring) at c concurrent workers of b records per call.
func PointAt(ctx context.Context, cfg Config, c, b int) (Point, error) {
	p := Point{Concurrency: c, Batch: b}
	type entry struct {
		w   *Workload
		acc SliceResult
	}
	var ws []*entry
	defer func() {
		for _, e := range ws {
			e.w.Close()
		}
	}()
	mks := []func() (*Workload, error){
		func() (*Workload, error) { return JournalWorkload(ctx, cfg.Dir, c, b, cfg.Fields, nil) },
		func() (*Workload, error) { return CeilingWorkload(ctx, cfg.Dir, c, b, cfg.RecordBytes, false) },
		func() (*Workload, error) { return CeilingWorkload(ctx, cfg.Dir, c, b, cfg.RecordBytes, true) },
		func() (*Workload, error) { return KeyedCeilingWorkload(ctx, cfg.Dir, c, b, cfg.RecordBytes) },
	}
	if cfg.Ring != nil {
		mks = append(mks, func() (*Workload, error) { return JournalWorkload(ctx, cfg.Dir, c, b, cfg.Fields, cfg.Ring) })
	}
	if cfg.Pipelined {
		mks = append(mks, func() (*Workload, error) { return PipelinedWorkload(ctx, cfg.Dir, c, b, cfg.Fields) })
	}
	for _, mk := range mks {
		w, err := mk()
		if err != nil {
			return p, err
		}
		ws = append(ws, &entry{w: w})
	}
	n := Slices(cfg.Duration)
	for range n {
		for _, e := range ws {
			u0 := readUsage()
			r, err := RunSlice(e.w.Steps, cfg.Duration/time.Duration(n))
			if err != nil {
				return p, err
			}
			e.acc.lats = append(e.acc.lats, r.lats...)
			e.acc.Records += r.Records
			e.acc.Elapsed += r.Elapsed
			e.acc.usage = e.acc.usage.add(readUsage().sub(u0))
		}
	}
	p.Journal, p.Ceiling, p.CeilingBatched, p.CeilingKeyed = ws[0].acc.Summarize(), ws[1].acc.Summarize(), ws[2].acc.Summarize(), ws[3].acc.Summarize()
	p.Ratio = Ratio(p.Journal.RecordsPerSec, p.Ceiling.RecordsPerSec)
	p.RatioBatched = Ratio(p.Journal.RecordsPerSec, p.CeilingBatched.RecordsPerSec)
	p.KeyedRatio = Ratio(p.CeilingKeyed.RecordsPerSec, p.CeilingBatched.RecordsPerSec)
	if cfg.Ring != nil {
		s := ws[4].acc.Summarize()
		p.Sealed = &s
		p.SealedRatio = Ratio(s.RecordsPerSec, p.Journal.RecordsPerSec)
	}
	if cfg.Pipelined {
		m := ws[len(ws)-1].acc.Summarize()
		p.Pipelined = &m
		p.PipelinedRatio = Ratio(m.RecordsPerSec, p.CeilingBatched.RecordsPerSec)
	}
	return p, nil
}

// Ratio is x/y rounded to three places; 0 when y is 0.
func Ratio(x, y float64) float64 {
	if y == 0 {
		return 0
	}
	return float64(int(x/y*1000+0.5)) / 1000
}

// Judge checks points against the targets.
func Judge(points []Point) *Verdict {
	t := &Verdict{RecordsPerSecTarget: TargetRecordsPerSec, RatioTarget: TargetRatio, MinRatio: -1, MinRatioBatched: -1}
	var below []string
	for _, p := range points {
		if p.Concurrency == 64 && p.Batch == 1 {
			t.RecordsPerSecAt64x1 = p.Journal.RecordsPerSec
			t.RecordsPerSecMet = p.Journal.RecordsPerSec >= TargetRecordsPerSec
		}
		if t.MinRatio < 0 || p.Ratio < t.MinRatio {
			t.MinRatio = p.Ratio
		}
		if t.MinRatioBatched < 0 || p.RatioBatched < t.MinRatioBatched {
			t.MinRatioBatched = p.RatioBatched
		}
		if p.RatioBatched < TargetRatio {
			below = append(below, fmt.Sprintf("c=%d b=%d at %.2f of batched", p.Concurrency, p.Batch, p.RatioBatched))
		}
		if p.Sealed != nil && p.Concurrency == 64 {
			if t.SealedRatioTarget == 0 || p.SealedRatio < t.MinSealedRatioAt64 {
				t.MinSealedRatioAt64 = p.SealedRatio
			}
			t.SealedRatioTarget = TargetSealedRatio
			t.SealedRatioMet = t.MinSealedRatioAt64 >= TargetSealedRatio
		}
	}
	t.RatioBatchedMet = t.MinRatioBatched >= TargetRatio
	t.RatioMet = t.RatioBatchedMet
	if len(below) > 0 {
		t.BelowBatched = strings.Join(below, "; ")
	}
	return t
}

// Fields is the kind's fields of every bench record: payload bytes of text.
func Fields(payload int) []byte {
	return []byte(`{"payload":"` + strings.Repeat("x", payload) + `"}`)
}

// RecordBytes is the canonical size of a bench record with fields at a
// typical seq, so the ceiling writes rows of the same size.
func RecordBytes(fields []byte) (int, error) {
	raw, err := store.EncodeBody(store.Body{Seq: 100000, Run: store.NewRunID(), Epoch: 1, V: store.RecordVersion, Kind: "BenchStep", Fields: fields})
	if err != nil {
		return 0, err
	}
	return len(raw), nil
}

// SliceResult is what workers did in one or more slices.
type SliceResult struct {
	lats    [][]time.Duration
	Records uint64
	Elapsed time.Duration
	usage   usage // the process's, over the slices (PointAt measures it)
}

// Summarize gives the rate and the per-call latency percentiles.
func (r SliceResult) Summarize() Measurement {
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
	rate := 0.0
	if r.Elapsed > 0 {
		rate = float64(int(float64(r.Records)/r.Elapsed.Seconds() + 0.5))
	}
	m := Measurement{Records: r.Records, Seconds: r.Elapsed.Seconds(), RecordsPerSec: rate, P50us: q(0.50), P99us: q(0.99)}
	if r.Records > 0 {
		m.CPUusPerRecord = float64(int(float64(r.usage.cpu.Nanoseconds())/1e3/float64(r.Records)*10+0.5)) / 10
		m.WrittenBytesPerRecord = float64(int(float64(r.usage.written)/float64(r.Records) + 0.5))
	}
	return m
}

// RunSlice runs each step in a loop on a worker of its own until d has
// passed, and records every call's latency. The slice lasts until the
// slowest worker's last step returns, so no write in flight is left out of
// the rate.
func RunSlice(steps []func() (int, error), d time.Duration) (SliceResult, error) {
	c := len(steps)
	lats := make([][]time.Duration, c)
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
	r := SliceResult{lats: lats, Elapsed: time.Since(start)}
	for _, n := range counts {
		r.Records += n
	}
	return r, errors.Join(errs...)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// JournalWorkload appends to a fresh journal file in dir: c workers, each
// with a leased run of its own (as in production, so every append pays the
// fence check), b records of fields per append. With ring, appends go
// through store/sealed; each run (a key scope of its own) gets its first
// record, and so its key, before the workload is returned.
func JournalWorkload(ctx context.Context, dir string, c, b int, fields []byte, ring keyring.Ring) (*Workload, error) {
	name := fmt.Sprintf("journal-c%d-b%d.db", c, b)
	if ring != nil {
		name = fmt.Sprintf("sealed-c%d-b%d.db", c, b)
	}
	return journalWorkload(ctx, filepath.Join(dir, name), c, b, fields, ring, sqlite.Options{Logger: quietLogger()})
}

// PipelinedWorkload is JournalWorkload (unsealed) on a journal opened with
// sqlite.Options.PipelineFlush.
func PipelinedWorkload(ctx context.Context, dir string, c, b int, fields []byte) (*Workload, error) {
	path := filepath.Join(dir, fmt.Sprintf("pipelined-c%d-b%d.db", c, b))
	return journalWorkload(ctx, path, c, b, fields, nil, sqlite.Options{Logger: quietLogger(), PipelineFlush: true})
}

func journalWorkload(ctx context.Context, path string, c, b int, fields []byte, ring keyring.Ring, opts sqlite.Options) (*Workload, error) {
	s, err := sqlite.Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	w := &Workload{Close: func() { s.Close(); RemoveDB(path) }}
	var j store.Journal = s
	if ring != nil {
		j = sealed.New(s, ring, sealed.Options{})
	}
	for range c {
		run := store.NewRunID()
		l, err := s.Acquire(ctx, run, "bench", time.Hour)
		if err != nil {
			w.Close()
			return nil, err
		}
		batch := make([]store.Append, b)
		for i := range batch {
			batch[i] = store.Append{Run: run, Kind: "BenchStep", Fields: fields}
		}
		if ring != nil {
			if _, err := j.Append(ctx, l.Epoch, batch[:1]); err != nil {
				w.Close()
				return nil, err
			}
		}
		w.Steps = append(w.Steps, func() (int, error) {
			_, err := j.Append(ctx, l.Epoch, batch)
			return b, err
		})
	}
	return w, nil
}

// ceilingDSN is the journal's own DSN: the same pragmas, nothing else.
func ceilingDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

// CeilingWorkload inserts plain rows of recBytes+64 bytes (the body and its
// two hashes) with the journal's durability and no other work: each worker
// committing its own transactions, or (batched) all workers' pending rows
// committed together by one writer.
func CeilingWorkload(ctx context.Context, dir string, c, b int, recBytes int, batched bool) (*Workload, error) {
	name := fmt.Sprintf("ceiling-c%d-b%d-%v.db", c, b, batched)
	return ceilingWorkload(ctx, filepath.Join(dir, name), ceilingTable, c, b, recBytes, batched)
}

// KeyedCeilingWorkload is the batched ceiling into a table that also keeps
// the journal's unique key (tenant, run, seq): what reading a run by seq
// costs a plain insert, with no chain, no fence and no other index.
func KeyedCeilingWorkload(ctx context.Context, dir string, c, b int, recBytes int) (*Workload, error) {
	name := fmt.Sprintf("ceiling-c%d-b%d-keyed.db", c, b)
	return ceilingWorkload(ctx, filepath.Join(dir, name), keyedCeilingTable, c, b, recBytes, true)
}

// The ceilings' tables. The keyed one also names the tenant in every row,
// as the journal does, so that its key is the journal's byte for byte.
const (
	ceilingTable      = `CREATE TABLE rows(id INTEGER PRIMARY KEY, run TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL)`
	keyedCeilingTable = `CREATE TABLE rows(id INTEGER PRIMARY KEY, tenant TEXT NOT NULL DEFAULT 'default', run TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, UNIQUE(tenant, run, seq))`
)

func ceilingWorkload(ctx context.Context, path, table string, c, b int, recBytes int, batched bool) (*Workload, error) {
	db, err := sql.Open("sqlite", ceilingDSN(path))
	if err != nil {
		return nil, err
	}
	w := &Workload{Close: func() { db.Close(); RemoveDB(path) }}
	db.SetMaxOpenConns(1) // one connection, as the journal's writer has
	if _, err := db.ExecContext(ctx, table); err != nil {
		w.Close()
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
			w.Steps = append(w.Steps, func() (int, error) {
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
	w.Close = func() { g.stop(); db.Close(); RemoveDB(path) }
	for range c {
		req := &plainReq{run: store.NewRunID().String(), n: b, done: make(chan error, 1)}
		w.Steps = append(w.Steps, func() (int, error) {
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

// RemoveDB removes a SQLite file and its WAL and shared-memory files.
func RemoveDB(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(p)
	}
}

// FsyncRate measures 4 KiB write+fsync pairs per second in dir for d: the
// floor every durable commit stands on.
func FsyncRate(dir string, d time.Duration) (float64, error) {
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
