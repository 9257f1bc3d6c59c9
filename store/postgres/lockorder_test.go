package postgres

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/store"
)

// processPool is a pool of its own on the test server, as another process
// of a deployment would have, whose connections carry name as their
// application_name (so a test can tell its backends in pg_stat_activity)
// and break a deadlock after 20 ms instead of deadlock_timeout's 1 s, when
// the test's role may set it.
func processPool(t *testing.T, name string) *pgxpool.Pool {
	t.Helper()
	cfg := testPool(t).Config().Copy()
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET deadlock_timeout = '20ms'")
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege: keep the server's
			return nil
		}
		return err
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// lockPass stands a store's append group commit where its groups hold the
// locks of their lock pass, before any write: every such group is reported
// on passed, and the first hold of them wait there until released. The
// attempts that fail are kept in failures.
type lockPass struct {
	passed  chan []store.RunID
	release chan struct{}

	mu       sync.Mutex
	hold     int
	failures []error
}

func standAtLockPass(s *Store, hold int) *lockPass {
	p := &lockPass{passed: make(chan []store.RunID, 64), release: make(chan struct{}), hold: hold}
	s.hooks = &groupHooks{
		locked: func(runs []store.RunID) {
			p.passed <- runs
			p.mu.Lock()
			wait := p.hold > 0
			p.hold--
			p.mu.Unlock()
			if wait {
				<-p.release
			}
		},
		failed: func(err error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.failures = append(p.failures, err)
		},
	}
	return p
}

func (p *lockPass) failed() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.failures...)
}

// next waits for the next group to pass its lock pass and returns its runs.
func (p *lockPass) next(t *testing.T, what string) []store.RunID {
	t.Helper()
	select {
	case runs := <-p.passed:
		return runs
	case <-time.After(time.Minute):
		t.Fatalf("no group passed its lock pass: %s", what)
		return nil
	}
}

// TestMixedGroups_OneLockOrderNoDeadlock: two processes' groups over the
// same two runs, each group mixing a run its process remembers (written by
// the one-round-trip statement, known.go) with one it does not, must take
// their locks in one run-id order, so that one waits for the other instead
// of each holding a run the other waits for.
//
// Process A remembers run r1 and not r2, process B r2 and not r1. A's group
// is held just after its lock pass. B's group must then wait in its own
// lock pass for A. Before the fix a group locked its ordinary runs first
// and its remembered runs in a second pass, with the writes: A's lock pass
// took only r2, B's only r1, B went on to wait for r2 in its writes, and
// released, A waited for r1 in its own: a deadlock, which PostgreSQL
// broke after deadlock_timeout by aborting one group (SQLSTATE 40P01), to
// be retried.
func TestMixedGroups_OneLockOrderNoDeadlock(t *testing.T) {
	ctx := context.Background()
	tag := strings.ToLower(ulid.Make().String())
	nameA, nameB := "lockorder-a-"+tag, "lockorder-b-"+tag
	a, err := New(ctx, processPool(t, nameA), Options{Schema: "runseal_test", Tenant: freshTenant(), Committers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := New(ctx, processPool(t, nameB), Options{Schema: "runseal_test", Tenant: a.Tenant(), Committers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	epochs := map[store.RunID]store.Epoch{}
	lease := func() store.RunID {
		run := store.NewRunID()
		l, err := a.Acquire(ctx, run, "worker", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		epochs[run] = l.Epoch
		return run
	}
	r1, r2, stallA, stallB := lease(), lease(), lease(), lease()
	if _, err := a.Append(ctx, epochs[r1], []store.Append{note(r1, "first")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, epochs[r2], []store.Append{note(r2, "first")}); err != nil {
		t.Fatal(err)
	}
	_, aR1 := a.known.get(r1)
	_, aR2 := a.known.get(r2)
	_, bR1 := b.known.get(r1)
	_, bR2 := b.known.get(r2)
	if !aR1 || aR2 || bR1 || !bR2 {
		t.Fatalf("A remembers r1 %v, r2 %v; B r1 %v, r2 %v; want A r1 only, B r2 only", aR1, aR2, bR1, bR2)
	}

	type result struct {
		who  string
		run  store.RunID
		recs []store.Record
		err  error
	}
	results := make(chan result, 6)
	appendTo := func(who string, s *Store, run store.RunID) {
		recs, err := s.Append(ctx, epochs[run], []store.Append{note(run, who)})
		results <- result{who, run, recs, err}
	}
	// groupOf makes s's next group the appends to r1 and r2: its one
	// committer is held at a lone append's lock pass while they queue.
	groupOf := func(who string, s *Store, p *lockPass, stall store.RunID) {
		t.Helper()
		go appendTo(who, s, stall)
		p.next(t, who+"'s lone append")
		go appendTo(who, s, r1)
		go appendTo(who, s, r2)
		waitFor(t, func() bool { return s.appends.Waiting() == 2 })
		p.release <- struct{}{}
		if got := <-results; got.err != nil {
			t.Fatalf("%s's lone append: %v", who, got.err)
		}
	}
	pa := standAtLockPass(a, 2)
	pb := standAtLockPass(b, 1)
	groupOf("A", a, pa, stallA)
	if runs := pa.next(t, "A's group"); len(runs) != 2 {
		t.Fatalf("A's group is %v, want r1 and r2", runs)
	}
	// A's group holds its locks; B's group starts.
	groupOf("B", b, pb, stallB)
	waitFor(t, func() bool {
		var n int
		err := a.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity w JOIN pg_stat_activity h ON h.pid = ANY(pg_blocking_pids(w.pid))
			WHERE w.application_name = $1 AND h.application_name = $2`, nameB, nameA).Scan(&n)
		return err == nil && n > 0
	})
	select {
	case runs := <-pb.passed:
		t.Errorf("B's group of %v got past its lock pass while A's group, past its own, held its locks: "+
			"the groups took their runs in two passes, and now B waits in its writes for a run A holds", runs)
	default:
	}
	pa.release <- struct{}{}

	// A's group went first, so B's appends land after A's on both runs.
	want := map[string]store.Seq{"A": 2, "B": 3}
	for range 4 {
		r := <-results
		if r.err != nil {
			t.Errorf("%s's append to %s: %v", r.who, r.run, r.err)
			continue
		}
		if r.recs[0].Seq != want[r.who] {
			t.Errorf("%s's append to %s got seq %d, want %d", r.who, r.run, r.recs[0].Seq, want[r.who])
		}
	}
	for who, p := range map[string]*lockPass{"A": pa, "B": pb} {
		for _, err := range p.failed() {
			t.Errorf("%s's group's transaction failed: %v", who, err)
		}
	}
	for _, run := range []store.RunID{r1, r2} {
		if _, err := a.Verify(ctx, run); err != nil {
			t.Errorf("chain of %s: %v", run, err)
		}
	}
}
