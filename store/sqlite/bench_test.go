package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// BenchmarkAppend measures durable appends (WAL, synchronous=FULL) on a real
// file at several concurrencies and batch sizes. records/s is the figure to
// compare; ns/op is per Append call across all appenders.
func BenchmarkAppend(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		for _, size := range []int{1, 16} {
			b.Run(fmt.Sprintf("conc=%d/batch=%d", conc, size), func(b *testing.B) {
				benchmarkAppend(b, conc, size)
			})
		}
	}
}

// processCPU is the user and system time this process has used.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchmarkAppend(b *testing.B, conc, size int) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fields := []byte(`{"payload":"` + strings.Repeat("x", 256) + `"}`)
	batches := make([][]store.Append, conc)
	epochs := make([]store.Epoch, conc)
	for i := range batches {
		run := store.NewRunID()
		l, err := s.Acquire(ctx, run, "bench", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		epochs[i] = l.Epoch
		batches[i] = make([]store.Append, size)
		for j := range batches[i] {
			batches[i][j] = store.Append{Run: run, Kind: "BenchStep", Fields: fields}
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := processCPU(b)
	io0 := procIO(b)
	start := time.Now()
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := s.Append(ctx, epochs[i], batches[i]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "records/s")
	// CPU time per record is steadier than the rate on a shared machine:
	// other work takes turns on the CPUs but does not add to this
	// process's time.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N*size), "cpu-µs/record")
	io1 := procIO(b)
	b.ReportMetric(float64(io1["wchar"]-io0["wchar"])/float64(b.N*size), "written-B/record")
	b.ReportMetric(float64(io1["syscw"]-io0["syscw"])/float64(b.N*size), "writes/record")
}

// procIO reads this process's I/O counters (Linux): wchar is the bytes
// passed to write system calls, syscw their number.
func procIO(b *testing.B) map[string]int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skipf("no /proc/self/io: %v", err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out
}
