package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/internal/benchappend"
	"github.com/runseal/runseal/internal/benchjournal"
	"github.com/runseal/runseal/store"
)

// restoreBench is "journal bench --restore N": an export of N sealed runs
// restored into SQLite, exported again, and restored into a new SQLite file
// and (with --restore-postgres) a new PostgreSQL tenant, each step in a
// child process for its own peak RSS, beside the append rate and ceilings
// of the same run (measured before and after the steps).
type restoreBench struct {
	Runs        int           `json:"runs"`
	Records     int           `json:"records"`
	ExportBytes int64         `json:"export_bytes"`
	Steps       []restoreStep `json:"steps"`
	Before      benchPoint    `json:"append_before"` // concurrency 64, batch 1
	After       benchPoint    `json:"append_after"`
	Load        [2]float64    `json:"load"` // 1-minute load average before and after the steps
	Postgres    string        `json:"postgres,omitempty"`
	Faithful    bool          `json:"faithful"` // the re-export equals the source beyond its header
	Notes       []string      `json:"notes,omitempty"`
}

// restoreStep is one measured step.
type restoreStep struct {
	Op            string  `json:"op"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	PeakRSSMiB    float64 `json:"peak_rss_mib,omitempty"`
	// CPUSeconds is the child's user+system time: on a machine other work
	// keeps busy, records per CPU second is what the step costs.
	CPUSeconds          float64 `json:"cpu_seconds,omitempty"`
	RecordsPerCPUSecond float64 `json:"records_per_cpu_second,omitempty"`
}

// benchSource is the synthetic journal as Export reads it: every run of
// benchjournal is stamped with its one case, so the case's run listing is
// the listing of every run.
type benchSource struct {
	store.Journal // nil: Export calls only the methods below
	j             *benchjournal.Journal
}

func (b benchSource) Tenant() string { return b.j.Tenant() }
func (b benchSource) Checkpoint(ctx context.Context) (store.Checkpoint, error) {
	return b.j.Checkpoint(ctx)
}
func (b benchSource) RunsByID(ctx context.Context, after *store.RunID, limit int) ([]store.RunID, error) {
	return b.j.CaseRuns(ctx, b.j.Case, after, limit)
}
func (b benchSource) LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error) {
	return b.j.LogPositions(ctx, runs)
}
func (b benchSource) Head(ctx context.Context, run store.RunID) (store.Head, error) {
	return b.j.Head(ctx, run)
}
func (b benchSource) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	return b.j.ReadPage(ctx, run, from, limit)
}

// benchRestore runs the restore bench in dir.
func (a *app) benchRestore(ctx context.Context, dir string, n int, pgDSN string, d time.Duration, fields []byte, recBytes int, progress func(string, ...any)) (*restoreBench, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for child processes: %w", err)
	}
	rb := &restoreBench{Runs: n, Records: 2 * n}
	rb.Load[0] = loadAverage()
	progress("append rate and ceilings before the restore steps")
	if rb.Before, err = benchappend.PointAt(ctx, benchappend.Config{Dir: dir, Duration: d, Fields: fields, RecordBytes: recBytes}, 64, 1); err != nil {
		return nil, err
	}

	progress("generating an export of %d sealed runs", n)
	src, err := benchjournal.New(benchjournal.Spec{Origin: "bench.example/restore", Runs: n, RecordsPerRun: 2, PayloadBytes: 100})
	if err != nil {
		return nil, err
	}
	source := filepath.Join(dir, "source.export.jsonl")
	start := time.Now()
	sum, err := writeExport(ctx, benchSource{j: src}, source)
	if err != nil {
		return nil, fmt.Errorf("export the synthetic journal: %w", err)
	}
	src = nil // let the generator's memory go before the children run
	rb.ExportBytes = sum.Bytes
	rb.Steps = append(rb.Steps, rb.step("export (synthetic source, in process)", time.Since(start).Seconds(), scalePoint{}, sum.Bytes))

	child := func(op string, args ...string) error {
		progress("%s", op)
		p, err := measureChild(ctx, exe, append(args, "--peak-rss"))
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		var bytes int64
		if strings.HasPrefix(op, "export") {
			bytes = rb.ExportBytes
		}
		rb.Steps = append(rb.Steps, rb.step(op, p.Seconds, p, bytes))
		return nil
	}
	dbA, dbB := filepath.Join(dir, "restore-a.db"), filepath.Join(dir, "restore-b.db")
	defer benchappend.RemoveDB(dbA)
	defer benchappend.RemoveDB(dbB)
	for _, db := range []string{dbA, dbB} {
		if _, err := measureChild(ctx, exe, []string{"init", "--db", db, "--origin", "bench.example/restored"}); err != nil {
			return nil, fmt.Errorf("init %s: %w", db, err)
		}
	}
	if err := child("restore into SQLite", "restore", source, "--db", dbA); err != nil {
		return nil, err
	}
	again := filepath.Join(dir, "again.export.jsonl")
	if err := child("export from SQLite", "export", "--out", again, "--db", dbA); err != nil {
		return nil, err
	}
	if rb.Faithful, err = sameBeyondHeader(source, again); err != nil {
		return nil, err
	}
	if err := child("restore of that export into SQLite", "restore", again, "--db", dbB); err != nil {
		return nil, err
	}
	if pgDSN != "" {
		tenant := "bench" + strings.ToLower(store.NewRunID().String()[:8])
		rb.Postgres = "tenant " + tenant
		if err := child("restore into PostgreSQL", "restore", again, "--store", pgDSN, "--tenant", tenant); err != nil {
			return nil, err
		}
	} else {
		rb.Notes = append(rb.Notes, "PostgreSQL not measured: pass --restore-postgres postgres://...")
	}
	rb.Load[1] = loadAverage()
	progress("append rate and ceilings after the restore steps")
	if rb.After, err = benchappend.PointAt(ctx, benchappend.Config{Dir: dir, Duration: d, Fields: fields, RecordBytes: recBytes}, 64, 1); err != nil {
		return nil, err
	}
	return rb, nil
}

func (rb *restoreBench) step(op string, seconds float64, p scalePoint, bytes int64) restoreStep {
	s := restoreStep{Op: op, Seconds: seconds, PeakRSSMiB: p.PeakRSSMiB, CPUSeconds: p.CPUSeconds}
	if p.CPUSeconds > 0 {
		s.RecordsPerCPUSecond = float64(rb.Records) / p.CPUSeconds
	}
	if seconds > 0 {
		s.RecordsPerSec = float64(rb.Records) / seconds
		s.MBPerSec = float64(bytes) / 1e6 / seconds
	}
	return s
}

// writeExport exports j to a new file at path.
func writeExport(ctx context.Context, j store.Journal, path string) (disclosure.Summary, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return disclosure.Summary{}, err
	}
	sum, err := disclosure.Export(ctx, j, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return sum, err
}

// sameBeyondHeader reports whether two exports hold the same runs and log:
// equal after their first line (the header names the journal's origin).
func sameBeyondHeader(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ra, rb := bufio.NewReaderSize(fa, 1<<20), bufio.NewReaderSize(fb, 1<<20)
	for _, r := range []*bufio.Reader{ra, rb} {
		if _, err := r.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
			return false, err
		}
	}
	bufA, bufB := make([]byte, 1<<16), make([]byte, 1<<16)
	for {
		na, errA := io.ReadFull(ra, bufA)
		nb, errB := io.ReadFull(rb, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		if errA != nil || errB != nil {
			return errA == errB || (errA == io.ErrUnexpectedEOF && errB == io.ErrUnexpectedEOF), nil
		}
	}
}

// printRestoreBench prints the restore bench as a table.
func printRestoreBench(w io.Writer, rb *restoreBench) {
	fmt.Fprintf(w, "restore bench: %d sealed runs, %d records, export %.1f MB; load average %.2f before, %.2f after\n",
		rb.Runs, rb.Records, float64(rb.ExportBytes)/1e6, rb.Load[0], rb.Load[1])
	fmt.Fprintf(w, "%-40s %9s %12s %9s %12s %9s %14s\n", "step", "seconds", "records/s", "MB/s", "peak RSS", "CPU s", "records/CPU s")
	for _, s := range rb.Steps {
		rss := "-"
		if s.PeakRSSMiB > 0 {
			rss = fmt.Sprintf("%.1f MiB", s.PeakRSSMiB)
		}
		mb := "-"
		if s.MBPerSec > 0 {
			mb = fmt.Sprintf("%.1f", s.MBPerSec)
		}
		fmt.Fprintf(w, "%-40s %9.1f %12.0f %9s %12s %9.1f %14.0f\n", s.Op, s.Seconds, s.RecordsPerSec, mb, rss, s.CPUSeconds, s.RecordsPerCPUSecond)
	}
	for _, p := range []struct {
		when string
		p    benchPoint
	}{{"before", rb.Before}, {"after", rb.After}} {
		fmt.Fprintf(w, "append %s (64 appenders x 1): journal %.0f records/s, ceiling %.0f, batched ceiling %.0f\n",
			p.when, p.p.Journal.RecordsPerSec, p.p.Ceiling.RecordsPerSec, p.p.CeilingBatched.RecordsPerSec)
	}
	fmt.Fprintf(w, "the re-export equals the source beyond its header: %v\n", rb.Faithful)
	for _, n := range rb.Notes {
		fmt.Fprintln(w, n)
	}
}
