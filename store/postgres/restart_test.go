package postgres

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
)

// TestDatabaseRestartLosesNothingAcknowledged crashes the server (immediate
// shutdown: no checkpoint, recovery from the WAL) under concurrent appends
// and seals, restarts it, and checks that every acknowledged write is
// there, that the failures said clearly what happened, and that the store
// carries on without being reopened.
func TestDatabaseRestartLosesNothingAcknowledged(t *testing.T) {
	ctx := context.Background()
	pgtest.DSN(t) // fails or skips like every other test when there is no PostgreSQL
	srv, err := pgtest.Start(ctx)
	if err != nil {
		if os.Getenv(pgtest.EnvDSN) != "" {
			t.Skipf("this test needs a server it can crash and restart, and cannot start one beside %s: %v", pgtest.EnvDSN, err)
		}
		t.Fatalf("start a server to crash: %v", err)
	}
	defer srv.Stop()
	s, err := Open(ctx, srv.DSN, Options{MaxConns: 16, CommitTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const writers = 8
	var (
		mu       sync.Mutex
		acks     = map[store.RunID]*ackedRun{}
		failures []error
		inDoubt  atomic.Int32
		sealedN  atomic.Int32 // seals acknowledged
		failed   atomic.Int32 // writes that failed
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := store.NewRunID()
			for i := 0; !stop.Load(); i++ {
				batch := []store.Append{note(run, "step")}
				if i%10 == 9 {
					batch = append(batch, conclude(run, "succeeded"))
				}
				recs, err := s.Append(ctx, 1, batch)
				if err == nil && i%10 == 9 {
					var leaf store.Digest
					leaf, err = s.Seal(ctx, run, 1, "succeeded")
					if err == nil {
						mu.Lock()
						acks[run] = &ackedRun{recs: append(acks[run].recsOrNil(), recs...), sealed: leaf}
						mu.Unlock()
						sealedN.Add(1)
						run = store.NewRunID()
						continue
					}
				}
				mu.Lock()
				if err == nil {
					a := acks[run]
					if a == nil {
						a = &ackedRun{}
						acks[run] = a
					}
					a.recs = append(a.recs, recs...)
				} else {
					failures = append(failures, err)
					failed.Add(1)
					var cu *store.CommitUnknownError
					if errors.As(err, &cu) {
						inDoubt.Add(1)
					}
				}
				mu.Unlock()
				if err != nil {
					// Whatever happened to an in-doubt write, a new run
					// keeps the bookkeeping simple.
					run = store.NewRunID()
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	// Synchronised on what the writers saw, not on time: every writer has
	// had a seal acknowledged before the crash, has failed while the server
	// is down, and has had a seal acknowledged again after the restart.
	waitFor(t, func() bool { return sealedN.Load() >= writers })
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return failed.Load() >= writers })
	mu.Lock()
	during := len(failures)
	mu.Unlock()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	again := sealedN.Load()
	waitFor(t, func() bool { return sealedN.Load() >= again+writers })
	stop.Store(true)
	wg.Wait()

	if during == 0 {
		t.Fatal("no write failed while the server was down")
	}
	for _, err := range failures {
		var cu *store.CommitUnknownError
		msg := err.Error()
		switch {
		case errors.As(err, &cu):
			if !strings.Contains(msg, "may or may not have landed") {
				t.Errorf("in-doubt error does not say so: %v", err)
			}
		case strings.HasPrefix(msg, "postgres journal: ") && strings.Contains(msg, "not written: "):
		default:
			t.Errorf("unclear failure during the restart: %v", err)
		}
		if !strings.Contains(msg, "run ") {
			t.Errorf("failure does not name its run: %v", err)
		}
	}
	t.Logf("%d failures while the server was down or recovering (%d in doubt); first: %v; last: %v", len(failures), inDoubt.Load(), failures[0], failures[len(failures)-1])

	// The store works again without being reopened, and nothing
	// acknowledged is missing.
	var total, sealed int
	for run, a := range acks {
		got, err := s.Read(ctx, run, 1)
		if err != nil {
			t.Fatalf("read %s after restart: %v", run, err)
		}
		if len(got) < len(a.recs) {
			t.Fatalf("run %s: %d records acknowledged, %d survived the crash", run, len(a.recs), len(got))
		}
		for i, r := range a.recs {
			if got[i].Seq != r.Seq || got[i].Hash != r.Hash {
				t.Fatalf("run %s seq %d: acknowledged hash %s, stored %s", run, r.Seq, r.Hash, got[i].Hash)
			}
		}
		d, err := s.Verify(ctx, run)
		if err != nil {
			t.Fatalf("verify %s: %v", run, err)
		}
		if a.sealed != (store.Digest{}) {
			p, err := s.LogPositions(ctx, []store.RunID{run})
			if err != nil || p[0] == nil || p[0].Leaf != a.sealed || d != a.sealed {
				t.Fatalf("acknowledged seal of %s lost: %+v %v", run, p, err)
			}
			sealed++
		}
		total += len(a.recs)
	}
	if total == 0 || sealed == 0 {
		t.Fatalf("too little was acknowledged to judge: %d records, %d seals", total, sealed)
	}
	var size int64
	if err := s.Pool().QueryRow(ctx, `SELECT size FROM runseal.logs WHERE tenant = 'default'`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	var indexed int64
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM runseal.runs WHERE tenant = 'default' AND log_index IS NOT NULL AND log_index < $1`, size).Scan(&indexed); err != nil || indexed != size {
		t.Fatalf("log of size %d holds %d sealed runs (%v): a gap survived the crash", size, indexed, err)
	}
	var sealedRuns []store.RunID
	rows, err := s.Pool().Query(ctx, `SELECT run FROM runseal.runs WHERE tenant = 'default' AND log_index IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		r, _ := store.ParseRunID(id)
		sealedRuns = append(sealedRuns, r)
	}
	rows.Close()
	verifyLog(t, ctx, s, sealedRuns)
	t.Logf("after restart: %d acknowledged records in %d runs and %d seals all present; log size %d", total, len(acks), sealed, size)
}

// ackedRun is what the store acknowledged for one run.
type ackedRun struct {
	recs   []store.Record
	sealed store.Digest
}

func (a *ackedRun) recsOrNil() []store.Record {
	if a == nil {
		return nil
	}
	return a.recs
}
