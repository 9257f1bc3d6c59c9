package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
)

// BenchmarkThroughput reports, per concurrency, appends and seals per
// second beside the same server's plain-insert ceiling measured in the same
// run, and their ratios. The target is append_vs_batched_insert >= 0.5 at
// 64: appends against one transaction of all pending plain rows.
//
//	go test ./store/postgres -run '^$' -bench Throughput -benchtime 1x
func BenchmarkThroughput(b *testing.B) {
	dsn := pgtest.DSN(b)
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", conc), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := Bench(context.Background(), dsn, BenchOptions{Concurrency: []int{conc}, Duration: 3 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				r := res[0]
				b.ReportMetric(r.InsertsPerSec, "inserts/s")
				b.ReportMetric(r.AppendsPerSec, "appends/s")
				b.ReportMetric(r.SealsPerSec, "seals/s")
				b.ReportMetric(r.AppendRatio, "append/insert")
				b.ReportMetric(r.BatchedInsertsPerSec, "batched-inserts/s")
				b.ReportMetric(r.AppendBatchedRatio, "append/batched")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

// BenchmarkAppend is the per-operation cost of one leased one-record
// append, from one writer.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, Options{})
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Append(ctx, l.Epoch, []store.Append{note(run, "x")}); err != nil {
			b.Fatal(err)
		}
	}
}
