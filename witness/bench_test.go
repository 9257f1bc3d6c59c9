package witness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/journaltest"
)

// benchLogs prepares n logs, each with a chain of signed checkpoints 1, 2,
// ..., steps, so that the benchmark loop does no log-side work.
func benchLogs(b *testing.B, e *env, n, steps int) (logs []*journaltest.Log, bodies [][][]byte) {
	b.Helper()
	logs = make([]*journaltest.Log, n)
	bodies = make([][][]byte, n)
	for i := range logs {
		l := journaltest.NewLog(b, fmt.Sprintf("bench.example/%d", i))
		e.addLog(l)
		l.Tree.Grow(steps)
		for s := 1; s <= steps; s++ {
			bodies[i] = append(bodies[i], request(uint64(s-1), l.Tree.Proof(uint64(s-1), uint64(s)), l.Note(b, uint64(s), nil)))
		}
		logs[i] = l
	}
	return logs, bodies
}

// BenchmarkAddCheckpoint measures Witness.AddCheckpoint without HTTP: one
// log signature verified, one proof checked, one cosignature, one durable
// compare-and-swap per op. Serial, each op waits for its own fsync;
// parallel, ops for different logs share commits.
func BenchmarkAddCheckpoint(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprintf("logs=%d", par), func(b *testing.B) {
			e := newEnv(b)
			steps := (b.N + par - 1) / par
			_, bodies := benchLogs(b, e, par, steps)
			var groups, writes atomic.Int64
			var commitTime atomic.Int64
			e.store.groupHook = func(n int, d time.Duration) {
				groups.Add(1)
				writes.Add(int64(n))
				commitTime.Add(int64(d))
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for i := range par {
				wg.Go(func() {
					for _, body := range bodies[i] {
						req, err := ParseAddCheckpointRequest(body)
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := e.w.AddCheckpoint(context.Background(), req); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if g := groups.Load(); g > 0 {
				b.ReportMetric(float64(writes.Load())/float64(g), "writes/commit")
				b.ReportMetric(float64(commitTime.Load())/float64(g)/1e6, "ms/commit")
			}
		})
	}
}

// BenchmarkAddCheckpointHTTP measures add-checkpoint over loopback HTTP
// from 128 logs at once, with requests prepared beforehand, and reports
// the process's CPU time per request (user and system, from getrusage):
// unlike ns/op, that figure does not depend on what else the machine runs,
// so it is what a change to the witness's cost should be judged by.
func BenchmarkAddCheckpointHTTP(b *testing.B) {
	const par = 128
	e := newEnv(b)
	steps := (b.N + par - 1) / par
	_, bodies := benchLogs(b, e, par, steps)
	client := e.srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = par
	cpu0 := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range par {
		wg.Go(func() {
			for _, body := range bodies[i] {
				resp, err := client.Post(e.srv.URL+"/add-checkpoint", "text/plain", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(par*steps), "cpu-µs/op")
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
