package sealed_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/benchappend"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

const benchPayload = `{"applicant":{"name":"Ada Lovelace","email":"ada@example.com","address":"12 St James's Square, London"},"amount":1250,"notes":"first application, documents attached"}`

// appendRound has 64 appenders each append per records, one record per
// call to a run of its own (as 64 workers of a plane would), and returns
// appends per second.
func appendRound(b *testing.B, j store.Journal, per int) float64 {
	return appendRoundKind(b, j, per, "StepDone", benchPayload)
}

func appendRoundKind(b *testing.B, j store.Journal, per int, kind, fields string) float64 {
	b.Helper()
	ctx := context.Background()
	const appenders = 64
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	start := time.Now()
	for w := 0; w < appenders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, c := store.NewRunID(), store.NewCaseID()
			for i := 0; i < per; i++ {
				if _, err := j.Append(ctx, 1, []store.Append{{Run: run, Case: c, Kind: kind, Fields: []byte(fields)}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(appenders*per) / time.Since(start).Seconds()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// BenchmarkSealedAppend64 measures the sealed append rate beside the
// unsealed one (the ceiling) over SQLite, alternating rounds in one run,
// at 64 concurrent appenders. Reported: both rates and sealed/unsealed.
func BenchmarkSealedAppend64(b *testing.B) {
	plain, _ := openSQLite(b)
	inner, _ := openSQLite(b)
	j := sealed.New(inner, openRing(b), sealed.Options{})
	var u, s float64
	rounds := 0
	for i := 0; i < b.N; i++ {
		for r := 0; r < 3; r++ {
			u += appendRound(b, plain, 20)
			s += appendRound(b, j, 20)
			rounds++
		}
	}
	b.ReportMetric(u/float64(rounds), "unsealed-appends/s")
	b.ReportMetric(s/float64(rounds), "sealed-appends/s")
	b.ReportMetric(s/u, "sealed/unsealed")
	b.Logf("loadavg %s; %d alternating rounds of 64x20 appends", loadavg(), rounds)
}

// BenchmarkEraseScope100k measures erasing a case with 100,000 sealed
// records: the cost is the key's, and no record is touched.
func BenchmarkEraseScope100k(b *testing.B) {
	ctx := context.Background()
	const n = 100000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		inner, _ := openSQLite(b)
		ring := openRing(b)
		j := sealed.New(inner, ring, sealed.Options{})
		c := store.NewCaseID()
		for r := 0; r < n/1000; r++ {
			run := store.NewRunID()
			batch := make([]store.Append, 1000)
			for k := range batch {
				batch[k] = store.Append{Run: run, Case: c, Kind: "StepDone", Fields: []byte(`{"n":` + fmt.Sprint(k) + `}`)}
			}
			if _, err := j.Append(ctx, 1, batch); err != nil {
				b.Fatal(err)
			}
		}
		cp, _ := inner.Checkpoint(ctx)
		runs, _ := inner.CaseRuns(ctx, c, nil, 1000)
		h0, _ := inner.Head(ctx, runs[0])
		b.StartTimer()
		start := time.Now()
		if _, err := ring.Erase(ctx, sealed.CaseScope(j.Tenant(), c)); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		b.StopTimer()
		h1, _ := inner.Head(ctx, runs[0])
		cp1, _ := inner.Checkpoint(ctx)
		if h0 != h1 || cp != cp1 {
			b.Fatal("erasure touched the journal")
		}
		b.ReportMetric(float64(d.Microseconds()), "erase-us")
		b.Logf("loadavg %s; erased a scope of %d records in %v", loadavg(), n, d)
	}
}

// BenchmarkSealedSteady measures, as "journal bench --sealed" does, the
// sealed journal beside the unsealed one over SQLite at 64 appenders of
// batch 1 and 16, each run's key made before the measured slices, in
// alternating one-second slices. Run it with -cpuprofile to see what
// sealing costs in the steady state.
func BenchmarkSealedSteady(b *testing.B) {
	ctx := context.Background()
	fields := benchappend.Fields(256)
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("64x%d", batch), func(b *testing.B) {
			dir := b.TempDir()
			// Each workload's goroutines (its store's writer included)
			// carry a profiler label: pprof -tagfocus journal=sealed.
			var plain, seal *benchappend.Workload
			var perr, serr error
			pprof.Do(ctx, pprof.Labels("journal", "unsealed"), func(ctx context.Context) {
				plain, perr = benchappend.JournalWorkload(ctx, dir, 64, batch, fields, nil)
			})
			pprof.Do(ctx, pprof.Labels("journal", "sealed"), func(ctx context.Context) {
				seal, serr = benchappend.JournalWorkload(ctx, dir, 64, batch, fields, openRing(b))
			})
			if err := errors.Join(perr, serr); err != nil {
				b.Fatal(err)
			}
			defer plain.Close()
			defer seal.Close()
			var u, s float64
			for i := 0; i < b.N; i++ {
				for _, w := range []struct {
					name string
					w    *benchappend.Workload
					sum  *float64
				}{{"unsealed", plain, &u}, {"sealed", seal, &s}} {
					var r benchappend.SliceResult
					var err error
					pprof.Do(ctx, pprof.Labels("journal", w.name), func(context.Context) {
						r, err = benchappend.RunSlice(w.w.Steps, time.Second)
					})
					if err != nil {
						b.Fatal(err)
					}
					*w.sum += r.Summarize().RecordsPerSec
				}
			}
			b.ReportMetric(u/float64(b.N), "unsealed-records/s")
			b.ReportMetric(s/float64(b.N), "sealed-records/s")
			b.ReportMetric(s/u, "sealed/unsealed")
			b.Logf("loadavg %s", loadavg())
		})
	}
}
