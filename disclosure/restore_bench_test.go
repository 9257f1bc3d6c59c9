package disclosure

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkRestoreSQLite restores a synthetic export of sealed runs (two
// records each, one admission key each, log indexes in reverse of run
// order) into a new SQLite journal. RUNSEAL_RESTORE_BENCH_RUNS sets the
// number of runs (default 5000).
func BenchmarkRestoreSQLite(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("RUNSEAL_RESTORE_BENCH_RUNS")); err == nil && v > 0 {
		n = v
	}
	path := filepath.Join(b.TempDir(), "export.jsonl")
	writeSynthExport(b, path, n, synthKey)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		j := openJournal(b, testOrigin)
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := Restore(context.Background(), j, f)
		b.StopTimer()
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
