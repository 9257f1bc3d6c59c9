package disclosure

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

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
	idle := newIdleMeter()
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
	idle.report(b, fi.Size())
}

// idleMeter reads the Go scheduler's idle time, the share of GOMAXPROCS
// that had no goroutine to run: pipeline bubbles, which the machine's
// other load does not add to (a thread the OS preempts counts as busy);
// and the process's CPU time, which other load adds to much less than to
// the wall clock.
type idleMeter struct {
	idle0, total0 float64
	cpu0          time.Duration
}

func newIdleMeter() *idleMeter {
	m := &idleMeter{}
	m.idle0, m.total0 = cpuClasses()
	m.cpu0 = processCPU()
	return m
}

// report adds idle-procs: of the GOMAXPROCS processors, how many were idle
// on average while the benchmark ran; and MB/cpu-s, bytes (b.SetBytes)
// per second of the process's CPU time.
func (m *idleMeter) report(b *testing.B, bytes int64) {
	cpu := processCPU() - m.cpu0
	idle, total := cpuClasses()
	if total > m.total0 {
		b.ReportMetric((idle-m.idle0)/(total-m.total0)*float64(runtime.GOMAXPROCS(0)), "idle-procs")
	}
	if cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
	}
}

func cpuClasses() (idle, total float64) {
	runtime.GC() // the CPU classes are brought up to date at the end of a GC cycle
	s := []metrics.Sample{{Name: "/cpu/classes/idle:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(s)
	return s[0].Value.Float64(), s[1].Value.Float64()
}

func BenchmarkSHA256(b *testing.B) {
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		sha256.Sum256(buf)
	}
}
