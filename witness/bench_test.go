package witness

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchLogs prepares n logs, each with a chain of signed checkpoints 1, 2,
// ..., steps, so that the benchmark loop does no log-side work.
func benchLogs(b *testing.B, e *env, n, steps int) (logs []*testLog, bodies [][][]byte) {
	b.Helper()
	logs = make([]*testLog, n)
	bodies = make([][][]byte, n)
	for i := range logs {
		l := newTestLog(b, fmt.Sprintf("bench.example/%d", i))
		e.addLog(l)
		l.tree.grow(steps)
		for s := 1; s <= steps; s++ {
			bodies[i] = append(bodies[i], request(uint64(s-1), l.tree.proof(uint64(s-1), uint64(s)), l.note(b, uint64(s), nil)))
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
