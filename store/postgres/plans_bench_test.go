package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"

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
	schema := "plansbench_" + strings.ToLower(ulid.Make().String())
	qs := pgx.Identifier{schema}.Sanitize()
	open := func(tenant string) *Store {
		s, err := New(ctx, p, Options{Schema: schema, Tenant: tenant})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	open("meta")
	b.Cleanup(func() { _, _ = p.Exec(context.Background(), `DROP SCHEMA `+qs+` CASCADE`) })
	exec := func(sql string) {
		if _, err := p.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER TABLE ` + qs + `.runs SET (autovacuum_enabled = false)`)
	exec(`ALTER TABLE ` + qs + `.leases SET (autovacuum_enabled = false)`)
	fill := func(tenant string) {
		exec(`INSERT INTO ` + qs + `.runs(tenant, run, head_seq, head_hash, active_at)
			SELECT '` + tenant + `', lpad(g::text, 26, '0'), 1, '\x00', g FROM generate_series(1, 20000) g`)
		exec(`INSERT INTO ` + qs + `.leases(tenant, run, owner, epoch, expires_at, released)
			SELECT '` + tenant + `', lpad(g::text, 26, '0'), '', 0, 'epoch', true FROM generate_series(1, 20000) g`)
	}
	fill("known")
	exec(`ANALYZE ` + qs + `.runs`)
	exec(`ANALYZE ` + qs + `.leases`)
	fill("grown")
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
