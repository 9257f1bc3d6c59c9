package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/runseal/runseal/internal/benchappend"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// scalePoint is one operation over a large run, measured in a child process
// so its peak RSS is its own and not the bench's.
type scalePoint struct {
	Op         string  `json:"op"`
	Records    int     `json:"records"`
	Seconds    float64 `json:"seconds"`
	PeakRSSMiB float64 `json:"peak_rss_mib,omitempty"` // absent where not measured or not reported
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`  // the child's user+system time, where measured
}

// benchScale builds one run of n/10 records, measures, grows it to n and
// measures again: memory that stays flat while the run grows tenfold is
// memory that does not depend on the run's length.
func (a *app) benchScale(ctx context.Context, dir string, n int, fields []byte, progress func(string, ...any)) ([]scalePoint, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for child processes: %w", err)
	}
	path := filepath.Join(dir, "scale.db")
	defer benchappend.RemoveDB(path)
	s, err := sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	run := store.NewRunID()
	var out []scalePoint
	written := 0
	sizes := []int{n}
	if n >= 10 {
		sizes = []int{n / 10, n}
	}
	for _, size := range sizes {
		progress("building a run of %d records", size)
		start, from := time.Now(), written
		for written < size {
			k := min(pageSize, size-written)
			batch := make([]store.Append, k)
			for i := range batch {
				batch[i] = store.Append{Run: run, Kind: "BenchStep", Fields: fields}
			}
			if _, err := s.Append(ctx, 1, batch); err != nil {
				s.Close()
				return nil, fmt.Errorf("build scale journal: %w", err)
			}
			written += k
		}
		out = append(out, scalePoint{Op: "append (batches of 1000)", Records: size - from, Seconds: time.Since(start).Seconds()})
		ops := []struct {
			name string
			args []string
		}{
			{"verify RUN", []string{"verify", run.String()}},
			{"verify --all", []string{"verify", "--all"}},
			{"read RUN", []string{"read", run.String()}},
			{"read RUN --json", []string{"read", "--json", run.String()}},
			{"read --from n/2 --limit 1000", []string{"read", run.String(), "--from", strconv.Itoa(size / 2), "--limit", "1000"}},
		}
		for _, op := range ops {
			progress("%s over %d records", op.name, size)
			p, err := measureChild(ctx, exe, append(op.args, "--db", path, "--tenant", a.tenant, "--peak-rss"))
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
			p.Op, p.Records = op.name, size
			out = append(out, p)
		}
	}
	return out, s.Close()
}

// measureChild runs this program with args, output discarded, and reports
// its wall time and the peak RSS the child reports of itself (--peak-rss).
func measureChild(ctx context.Context, exe string, args []string) (scalePoint, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	p := scalePoint{Seconds: time.Since(start).Seconds()}
	if ps := cmd.ProcessState; ps != nil {
		p.CPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
	}
	if err != nil {
		return p, fmt.Errorf("%v: %s", err, stderr.String())
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if v, ok := strings.CutPrefix(l, peakRSSPrefix); ok {
			kib, _ := strconv.ParseInt(v, 10, 64)
			p.PeakRSSMiB = float64(kib*10/1024) / 10
		}
	}
	return p, nil
}

// limitedBuffer keeps the first 4 KiB written to it, for error messages.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
