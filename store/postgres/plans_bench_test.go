package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// BenchmarkAppend_TenantUnknownToStatistics is one writer's leased
// one-record appends and seals on a tenant of 20,000 runs that the
// planner's statistics have not seen (the schema was analyzed when only
// another tenant's 20,000 runs were there): the case where a statement
// that leaves the planner a choice scans the whole tenant per append. It
// reports appends/s and seals/s; their ceiling is the same server's
// appends on a tenant the statistics know, which it reports beside them
// (known-appends/s), measured in the same run.
//
//	go test ./store/postgres -run '^$' -bench TenantUnknownToStatistics -benchtime 2000x
func BenchmarkAppend_TenantUnknownToStatistics(b *testing.B) {
	ctx := context.Background()
	p := testPool(b)
	schema, qs := statsSchema(b, "plansbench")
	open := func(tenant string) *Store {
		s, err := New(ctx, p, Options{Schema: schema, Tenant: tenant})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	fillTenant(b, qs, "known")
	for _, t := range []string{"runs", "leases"} {
		if _, err := p.Exec(ctx, `ANALYZE `+qs+`.`+t); err != nil {
			b.Fatal(err)
		}
	}
	fillTenant(b, qs, "grown")
	unknown, known := open("grown"), open("known")
	type writer struct {
		s     *Store
		run   store.RunID
		epoch store.Epoch
	}
	lease := func(s *Store) writer {
		run := store.NewRunID()
		l, err := s.Acquire(ctx, run, "bench", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		return writer{s, run, l.Epoch}
	}
	w, k := lease(unknown), lease(known)
	var unknownTime, knownTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, x := range []struct {
			w *writer
			d *time.Duration
		}{{&w, &unknownTime}, {&k, &knownTime}} {
			start := time.Now()
			if _, err := x.w.s.Append(ctx, x.w.epoch, []store.Append{note(x.w.run, "x")}); err != nil {
				b.Fatal(err)
			}
			*x.d += time.Since(start)
		}
	}
	b.StopTimer()
	// Seals: runs concluded first, then sealed one at a time.
	const seals = 200
	runs := make([]store.RunID, seals)
	for i := range runs {
		runs[i] = store.NewRunID()
		if _, err := unknown.Append(ctx, 1, []store.Append{note(runs[i], "x"),
			{Run: runs[i], Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for _, r := range runs {
		if _, err := unknown.Seal(ctx, r, 1, "succeeded"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seals)/time.Since(start).Seconds(), "seals/s")
	b.ReportMetric(float64(b.N)/unknownTime.Seconds(), "appends/s")
	b.ReportMetric(float64(b.N)/knownTime.Seconds(), "known-appends/s")
	b.ReportMetric(0, "ns/op")
}
