package journalstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sqlite"
)

// writesPerTrial is the durable journal writes of one trial's lifecycle
// as BenchmarkClaimComplete drives it (spec/lifecycle.md 14.3): reserve
// (study TrialReserved, trial RunAdmitted+TrialCreated), claim (Acquire,
// TrialClaimed), terminal (study TrialTerminal, trial
// TrialTerminal+RunConcluded, Seal, ReleaseLease).
const writesPerTrial = 8

// BenchmarkClaimComplete measures whole trials (reserve, claim, terminal
// with its seal) per second on a SQLite journal, from 1 and 4 studies
// driven in parallel by one process, between two measurements of the
// ceiling on the same machine in the same run: single-record durable
// appends per second at the same concurrency, divided by the writes a
// trial needs. trials/s is the figure; ceiling-trials/s is what the store
// alone would allow if each of those writes cost one record append (four
// are lease and seal calls, which cost less or more depending on the
// backend, so trials/s can exceed it: it is a yardstick, not a bound).
//
// The same runs on PostgreSQL (one process: see oneProcess), beside the
// PostgreSQL store's own append rate.
func BenchmarkClaimComplete(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) (store.Journal, func())
	}{
		{"sqlite", func(b *testing.B) (store.Journal, func()) {
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st, func() { st.Close() }
		}},
		{"postgres", func(b *testing.B) (store.Journal, func()) {
			tenant := "bench" + strings.ToLower(store.NewRunID().String())
			pg, err := postgres.Open(context.Background(), pgtest.DSN(b), postgres.Options{Tenant: tenant})
			if err != nil {
				b.Fatal(err)
			}
			return oneProcess{pg, filepath.Join(b.TempDir(), "lock")}, func() { pg.Close() }
		}},
	}
	for _, be := range backends {
		for _, round := range []string{"before", "after"} {
			for _, studies := range []int{1, 4} {
				b.Run(fmt.Sprintf("%s/ceiling-%s/conc=%d", be.name, round, studies), func(b *testing.B) { benchAppendCeiling(b, be.open, studies) })
				if round == "before" {
					b.Run(fmt.Sprintf("%s/trials/studies=%d", be.name, studies), func(b *testing.B) { benchTrials(b, be.open, studies) })
				}
			}
		}
	}
}

func benchAppendCeiling(b *testing.B, open func(*testing.B) (store.Journal, func()), conc int) {
	ctx := context.Background()
	st, done := open(b)
	defer done()
	runs := make([]store.RunID, conc)
	epochs := make([]store.Epoch, conc)
	for i := range runs {
		runs[i] = store.NewRunID()
		l, err := st.Acquire(ctx, runs[i], "bench", store.MaxTTL)
		if err != nil {
			b.Fatal(err)
		}
		epochs[i] = l.Epoch
	}
	fields := []byte(`{"trial":"01J9Z8Q4W5X6Y7Z8A9B0C1D2E3","owner_epoch":1,"state":"complete","cause":"terminal","values":[0.5]}`)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := st.Append(ctx, epochs[i], []store.Append{{Run: runs[i], Kind: "BenchStep", Fields: fields}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	perSec := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(perSec, "appends/s")
	b.ReportMetric(perSec/writesPerTrial, "ceiling-trials/s")
}

func benchTrials(b *testing.B, open func(*testing.B) (store.Journal, func()), studies int) {
	ctx := context.Background()
	st, done := open(b)
	defer done()
	s, err := journalstore.New(st)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := make([]lifecycle.StudyID, studies)
	for i := range ids {
		if ids[i], err = s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range studies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: ids[i], MaxTrials: 1 << 40})
				if err != nil {
					b.Error(err)
					return
				}
				tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "bench"})
				if err != nil {
					b.Error(err)
					return
				}
				if err := s.Terminal(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{0.5}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "trials/s")
}
