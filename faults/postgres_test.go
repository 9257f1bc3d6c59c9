package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/internal/acked"
	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sqlite"
)

// steadyLoad runs n writers against srv that keep going through errors,
// noting every run they tried; watch polls the checkpoint meanwhile.
func steadyLoad(t *testing.T, srv *served, n int, got acks, tried *sync.Map, w *watcher) (stop func(), failures func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	fails := 0
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := runTracked(ctx, srv, got, tried); err != nil && ctx.Err() == nil {
					mu.Lock()
					fails++
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Go(func() { w.poll(t, srv.client, done) })
	return func() { cancel(); close(done); wg.Wait() }, func() int { mu.Lock(); defer mu.Unlock(); return fails }
}

// runTracked is runOnce with 1 batch of 2 records, noting the run as tried
// first, so a run the store kept without acknowledging it is checked too.
func runTracked(ctx context.Context, srv *served, got acks, tried *sync.Map) error {
	return runOnceNoting(ctx, srv, got, func(r store.RunID) { tried.Store(r, true) })
}

// checkWhole fails t unless every run tried is whole or absent: its head
// is at 0 (never admitted), 2 (its one batch of two) or 3 (concluded):
// an append the store did not acknowledge left all of it or none.
func checkWhole(t *testing.T, s acked.Reader, tried *sync.Map) {
	t.Helper()
	ctx := context.Background()
	tried.Range(func(k, _ any) bool {
		run := k.(store.RunID)
		h, err := s.Head(ctx, run)
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatalf("run %s: %v", run, err)
		}
		switch h.Seq {
		case 0, 2, 3:
		default:
			t.Errorf("run %s: head at seq %d: a batch of two was cut", run, h.Seq)
		}
		return true
	})
}

// pgDSN is the URL form of a pgtest server's DSN, which --store takes.
func pgDSN(pg *pgtest.Server, db string) string {
	return "postgres://postgres@/" + db + "?host=" + pg.Dir + "&sslmode=disable"
}

// TestFault_PostgresRestartsUnderAppendsSealsAndRestore restarts the
// PostgreSQL under a serving journal three times (a clean fast stop and an
// immediate one, as a crash) while writers append, seal and release, then
// once more in the middle of a restore. Must hold: every acknowledged
// write is there; every run the store did not acknowledge is whole or
// absent; serve takes writes again by itself after each restart (its pool
// reconnects); signed checkpoints never go back or differ for one size; a
// cut restore names how to finish it, finishes with --resume, and every
// journal verifies.
func TestFault_PostgresRestartsUnderAppendsSealsAndRestore(t *testing.T) {
	campaign(t)
	ctx := context.Background()
	pg, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatalf("no PostgreSQL for the campaign (scripts/faults.sh installs it): %v", err)
	}
	t.Cleanup(pg.Stop)
	dsn := pgDSN(pg, "postgres")
	key := filepath.Join(t.TempDir(), "log.key")
	// A PostgreSQL journal is created by the first serve.
	srv := serve(t, dsn, "", "--key", key, "--checkpoint-every", "1", "--checkpoint-interval", "100ms")
	token := strings.TrimSpace(run(t, "journal", "token", "create", "--role", "writer", "--store", dsn, "--key", key))
	srv.client, err = api.NewClient(srv.base, api.ClientOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	got, seen := newAcks(), newWatcher()
	var tried sync.Map
	stop, failures := steadyLoad(t, srv, 4, got, &tried, seen)
	acked := got.records
	waitAcks := func(what string) {
		t.Helper()
		n := acked()
		until(t, what, 90*time.Second, func() bool { return acked() > n+20 })
	}
	waitAcks("writes flow")
	for i, crash := range []bool{false, true, true} {
		if crash {
			err = pg.Crash(ctx)
		} else {
			err = pg.StopFast(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		f := failures()
		if err := pg.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		waitAcks(fmt.Sprintf("restart %d: serve takes writes again by itself", i))
		t.Logf("restart %d (immediate %v): %d failed runs across it, %d records acknowledged", i, crash, failures()-f, acked())
	}
	stop()
	srv.kill()
	if failures() == 0 {
		t.Fatal("no write failed across three restarts: the restarts were not under load")
	}
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkAcked(t, s, got)
	checkWhole(t, s, &tried)
	seen.check(t, checkSigned(t, s))
	s.Close()
	verifyAll(t, dsn)

	// A restore cut by a PostgreSQL crash.
	export := filepath.Join(t.TempDir(), "big.export.jsonl")
	bigExport(t, export, 20000)
	rp := start(t, nil, "journal", "restore", export, "--store", dsn, "--tenant", "restored", "--key", key, "--log-level", "info")
	// Cut it while it appends: its checking is done, and appending the
	// runs takes a second or more.
	if _, _, ok := rp.wait(regexp.MustCompile(`restore phase done.*phase=checking`), 0, 120*time.Second); !ok {
		t.Fatalf("restore never finished checking:\n%s", rp.lines())
	}
	time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
	if err := pg.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	werr := rp.cmd.Wait()
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if werr == nil {
		t.Fatalf("restore finished before the crash landed; nothing was cut:\n%s", tail(rp.lines(), 5))
	} else {
		msg := tail(rp.lines(), 5)
		t.Logf("restore cut by the crash: %v\n%s", werr, msg)
		if !strings.Contains(msg, "--resume") {
			t.Errorf("a restore cut by a PostgreSQL crash does not say to run it again with --resume:\n%s", msg)
		}
		t.Log(run(t, "journal", "restore", export, "--store", dsn, "--tenant", "restored", "--key", key, "--resume"))
	}
	if out, err := runErr(t, "journal", "verify", "--all", "--store", dsn, "--tenant", "restored"); err != nil {
		t.Fatalf("verify --all of the restored tenant: %v\n%s", err, out)
	}
}

// bigExport writes an export of runs runs (one in ten sealed) built in a
// scratch SQLite journal, for a restore long enough to be cut.
func bigExport(t *testing.T, path string, runs int) {
	t.Helper()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "src.db")
	s, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []store.RunID
	for i := 0; i < runs; i += 1000 {
		var bulk []store.BulkAppend
		for range min(1000, runs-i) {
			r := store.NewRunID()
			ids = append(ids, r)
			var batch []store.Append
			for j := range 2 {
				batch = append(batch, store.Append{Run: r, Kind: "Step", Fields: []byte(fmt.Sprintf(`{"j":%d,"pad":"%s"}`, j, strings.Repeat("e", 200)))})
			}
			bulk = append(bulk, store.BulkAppend{Epoch: 1, Batch: batch})
		}
		if _, err := s.AppendBulk(ctx, bulk); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w * 10; i < len(ids); i += 80 {
				r := ids[i]
				if _, err := s.Append(ctx, 1, []store.Append{{Run: r, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Seal(ctx, r, 1, "succeeded"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s.Close()
	run(t, "journal", "export", "--db", db, "--out", path)
}
