package disclosure

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// BenchmarkExport exports a SQLite journal to io.Discard and, alternating
// with it in the same run, reads the same records through the same driver
// with nothing else done (the ceiling of any export through it: one ordered
// scan of hash and raw). RUNSEAL_EXPORT_BENCH_DB names an existing journal
// file to export (opened read-only by the ceiling); otherwise the journal
// is restored from a synthetic export of RUNSEAL_RESTORE_BENCH_RUNS sealed
// runs (default 5000). It reports MB/s, records/s and MB per CPU second of
// each (the machine may be shared: CPU seconds say what a step costs).
func BenchmarkExport(b *testing.B) {
	ctx := context.Background()
	path := os.Getenv("RUNSEAL_EXPORT_BENCH_DB")
	var j *sqlite.Store
	if path == "" {
		n := 5000
		if v, err := strconv.Atoi(os.Getenv("RUNSEAL_RESTORE_BENCH_RUNS")); err == nil && v > 0 {
			n = v
		}
		exp := filepath.Join(b.TempDir(), "export.jsonl")
		writeSynthExport(b, exp, n, synthKey)
		path = filepath.Join(b.TempDir(), "j.db")
		var err error
		if j, err = sqlite.Open(ctx, path, sqlite.Options{Origin: testOrigin}); err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(exp)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Restore(ctx, j, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	} else {
		var err error
		if j, err = sqlite.Open(ctx, path, sqlite.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	defer j.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=query_only(1)&_pragma=mmap_size(1073741824)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var exp, ceil measured
	for range b.N {
		exp.add(func() (int64, uint64) {
			sum, err := Export(ctx, j, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			return sum.Bytes, sum.Records
		})
		ceil.add(func() (int64, uint64) {
			rows, err := db.QueryContext(ctx, `SELECT hash, raw FROM records WHERE tenant = ? ORDER BY run, seq`, j.Tenant())
			if err != nil {
				b.Fatal(err)
			}
			defer rows.Close()
			var hash, raw sql.RawBytes
			var n int64
			var recs uint64
			for rows.Next() {
				if err := rows.Scan(&hash, &raw); err != nil {
					b.Fatal(err)
				}
				// What an export line of the record holds.
				n += int64(len(`{"hash":"","raw":}`+"\n") + 2*len(hash) + len(raw))
				recs++
			}
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			return n, recs
		})
	}
	exp.report(b, "export")
	ceil.report(b, "ceiling")
	b.Logf("load average %s", bytes.TrimSpace(loadavg()))
}

// measured sums a step's bytes, records, wall and CPU time over runs.
type measured struct {
	bytes     int64
	records   uint64
	wall, cpu time.Duration
}

func (m *measured) add(step func() (int64, uint64)) {
	start, c := time.Now(), cpuTime()
	n, r := step()
	m.wall += time.Since(start)
	m.cpu += cpuTime() - c
	m.bytes += n
	m.records += r
}

func (m *measured) report(b *testing.B, name string) {
	mb := float64(m.bytes) / 1e6
	b.ReportMetric(mb/m.wall.Seconds(), name+"-MB/s")
	b.ReportMetric(float64(m.records)/m.wall.Seconds(), name+"-records/s")
	b.ReportMetric(mb/m.cpu.Seconds(), name+"-MB/cpu-s")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() []byte {
	b, _ := os.ReadFile("/proc/loadavg")
	return b
}

var _ store.BulkReader = (*sqlite.Store)(nil)
