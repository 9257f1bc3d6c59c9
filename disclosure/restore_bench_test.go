package disclosure

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
)

// BenchmarkRestoreSQLite restores a synthetic export of sealed runs (two
// records each, one admission key each, log indexes in reverse of run
// order) into a new SQLite journal. RUNSEAL_RESTORE_BENCH_RUNS sets the
// number of runs (default 5000).
func BenchmarkRestoreSQLite(b *testing.B) {
	benchRestore(b, func(b *testing.B) store.Journal { return openJournal(b, testOrigin) })
}

// BenchmarkRestorePostgres is BenchmarkRestoreSQLite into a new tenant of
// the PostgreSQL server named by $RUNSEAL_POSTGRES_DSN (skipped without
// it).
func BenchmarkRestorePostgres(b *testing.B) {
	dsn := os.Getenv("RUNSEAL_POSTGRES_DSN")
	if dsn == "" {
		b.Skip("RUNSEAL_POSTGRES_DSN is not set")
	}
	benchRestore(b, func(b *testing.B) store.Journal {
		tenant := "bench" + strings.ToLower(store.NewRunID().String()[:10])
		s, err := postgres.Open(context.Background(), dsn, postgres.Options{Tenant: tenant, Schema: "runseal_bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}

func benchRestore(b *testing.B, open func(*testing.B) store.Journal) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("RUNSEAL_RESTORE_BENCH_RUNS")); err == nil && v > 0 {
		n = v
	}
	path := filepath.Join(b.TempDir(), "export.jsonl")
	writeSynthExport(b, path, n, synthKey)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		j := open(b)
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		var phases []string
		phase, start := "", time.Now()
		opts := RestoreOptions{Progress: func(p RestoreProgress) {
			if p.Phase != phase {
				phases = append(phases, fmt.Sprintf("%s from %.1fs", p.Phase, time.Since(start).Seconds()))
				phase = p.Phase
			}
		}}
		b.StartTimer()
		rep, err := RestoreWith(context.Background(), j, f, opts)
		b.StopTimer()
		b.Logf("%d runs in %.1fs: %s", n, time.Since(start).Seconds(), strings.Join(phases, ", "))
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Faithful() || rep.Records != 2*uint64(n) {
			b.Fatalf("report %+v", rep)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(2*n*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkExportSQLite exports a SQLite journal restored from a synthetic
// export of RUNSEAL_RESTORE_BENCH_RUNS sealed runs (default 5000).
func BenchmarkExportSQLite(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("RUNSEAL_RESTORE_BENCH_RUNS")); err == nil && v > 0 {
		n = v
	}
	path := filepath.Join(b.TempDir(), "export.jsonl")
	writeSynthExport(b, path, n, synthKey)
	j := openJournal(b, testOrigin)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Restore(context.Background(), j, f); err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.ResetTimer()
	var bytes int64
	for range b.N {
		sum, err := Export(context.Background(), j, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		bytes += sum.Bytes
	}
	b.ReportMetric(float64(bytes)/1e6/b.Elapsed().Seconds(), "MB/s")
}
