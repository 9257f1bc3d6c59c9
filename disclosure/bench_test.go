package disclosure

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/internal/benchjournal"
	"github.com/runseal/runseal/store"
)

// benchPackage writes a package of about runs*records*(payload+200) bytes
// from a synthetic journal through the real writer.
func benchPackage(b *testing.B, runs, records, payload int) (string, Options) {
	b.Helper()
	j, err := benchjournal.New(benchjournal.Spec{Origin: testOrigin, Runs: runs, RecordsPerRun: records, PayloadBytes: payload, UnsealedEvery: 5})
	if err != nil {
		b.Fatal(err)
	}
	k := newKeys(b, testOrigin, 7)
	cp, _ := j.Checkpoint(context.Background())
	path := filepath.Join(b.TempDir(), "bench.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := WritePackage(context.Background(), j, f, Selection{Cases: []store.CaseID{j.Case}}, k.sign(b, cp), k.signing()); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path, k.options()
}

// BenchmarkVerify reports verification throughput on a 64 MB package;
// BenchmarkSHA256 is the same machine's hashing ceiling for comparison.
// cmd/auditor's bench command measures a 1 GB package and peak RSS.
func BenchmarkVerify(b *testing.B) {
	path, opts := benchPackage(b, 3000, 20, 900)
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	var records uint64
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		rep, err := Verify(context.Background(), f, opts)
		f.Close()
		if err != nil || rep.Verdict != Sound {
			b.Fatalf("%v %s", err, summary(rep))
		}
		records = rep.Counts.Records
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkSHA256(b *testing.B) {
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		sha256.Sum256(buf)
	}
}
