package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// processStore opens a handle, with one committer, on tenant of the test
// schema through a processPool of its own named name.
func processStore(t *testing.T, name, tenant string) *Store {
	t.Helper()
	s, err := New(context.Background(), processPool(t, name), Options{Schema: "runseal_test", Tenant: tenant, Committers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waits reports whether a backend whose application_name is waiter waits
// for a lock that one named holder holds.
func waits(t *testing.T, waiter, holder string) bool {
	var n int
	err := testPool(t).QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity w JOIN pg_stat_activity h ON h.pid = ANY(pg_blocking_pids(w.pid))
		WHERE w.application_name = $1 AND h.application_name = $2`, waiter, holder).Scan(&n)
	return err == nil && n > 0
}

// lockPass stands a store's append group commit where its groups hold the
// locks of their lock pass, before any write: every such group is reported
// on passed, and those whose turn (counted from 1) is in hold wait there
// until released (or the test ends). The group transactions that fail are
// kept in failures.
type lockPass struct {
	passed  chan []store.RunID
	release chan struct{}

	mu       sync.Mutex
	calls    int
	hold     []int
	failures []error
}

func standAtLockPass(t *testing.T, s *Store, hold ...int) *lockPass {
	p := &lockPass{passed: make(chan []store.RunID, 64), release: make(chan struct{}), hold: hold}
	s.hooks = &groupHooks{
		locked: func(runs []store.RunID) {
			p.passed <- runs
			p.mu.Lock()
			p.calls++
			wait := slices.Contains(p.hold, p.calls)
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
	// A test that stops early lets its held groups go, so that closing
	// the store does not wait for them forever. (Cleanups run last first:
	// this one before the store's Close.)
	t.Cleanup(func() { close(p.release) })
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

// mixedRace is two processes, A and B, of one deployment, and two runs r1
// and r2 (leased by A), of which A remembers r1 only and B r2 only; A's
// group of an append to each is held past its lock pass.
type mixedRace struct {
	a, b         *Store
	nameA, nameB string // their connections' application_name
	r1, r2       store.RunID
	epochs       map[store.RunID]store.Epoch
	pa, pb       *lockPass
	results      chan appendResult
}

type appendResult struct {
	who  string
	run  store.RunID
	recs []store.Record
	err  error
}

// startMixedRace sets up a mixedRace whose runs' first records are
// first(run), and checks that A's group, held past its lock pass, holds
// the lock of each of its runs.
func startMixedRace(t *testing.T, first func(run store.RunID) store.Append) *mixedRace {
	t.Helper()
	ctx := context.Background()
	tag := strings.ToLower(ulid.Make().String())
	m := &mixedRace{nameA: "lockorder-a-" + tag, nameB: "lockorder-b-" + tag, epochs: map[store.RunID]store.Epoch{}, results: make(chan appendResult, 8)}
	m.a = processStore(t, m.nameA, freshTenant())
	m.b = processStore(t, m.nameB, m.a.Tenant())
	m.r1, m.r2 = m.lease(t), m.lease(t)
	if _, err := m.a.Append(ctx, m.epochs[m.r1], []store.Append{first(m.r1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.b.Append(ctx, m.epochs[m.r2], []store.Append{first(m.r2)}); err != nil {
		t.Fatal(err)
	}
	_, aR1 := m.a.known.get(m.r1)
	_, aR2 := m.a.known.get(m.r2)
	_, bR1 := m.b.known.get(m.r1)
	_, bR2 := m.b.known.get(m.r2)
	if !aR1 || aR2 || bR1 || !bR2 {
		t.Fatalf("A remembers r1 %v, r2 %v; B r1 %v, r2 %v; want A r1 only, B r2 only", aR1, aR2, bR1, bR2)
	}
	m.pa = standAtLockPass(t, m.a, 1, 2)
	m.pb = standAtLockPass(t, m.b, 1)
	m.groupOf(t, "A", m.a, m.pa, m.lease(t))
	if runs := m.pa.next(t, "A's group"); len(runs) != 2 {
		t.Fatalf("A's group is %v, want r1 and r2", runs)
	}
	// Every run of the group is locked once its lock pass is done: a probe
	// that skips locked rows finds none of them free.
	tx, err := testPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `SELECT run FROM runseal_test.leases WHERE tenant = $1 AND run = ANY($2) ORDER BY run FOR UPDATE SKIP LOCKED`,
		m.a.Tenant(), []string{m.r1.String(), m.r2.String()})
	if err != nil {
		t.Fatal(err)
	}
	free, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if len(free) > 0 {
		t.Errorf("A's group is past its lock pass with run(s) %v of its runs [%s %s] unlocked (r1 is the one A remembers): "+
			"it locks them in a second pass, with its writes", free, m.r1, m.r2)
	}
	return m
}

// lease leases a new run to A.
func (m *mixedRace) lease(t *testing.T) store.RunID {
	t.Helper()
	run := store.NewRunID()
	l, err := m.a.Acquire(context.Background(), run, "worker", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m.epochs[run] = l.Epoch
	return run
}

func (m *mixedRace) appendTo(who string, s *Store, run store.RunID) {
	recs, err := s.Append(context.Background(), m.epochs[run], []store.Append{note(run, who)})
	m.results <- appendResult{who, run, recs, err}
}

// groupOf makes s's next group the appends to r1 and r2.
func (m *mixedRace) groupOf(t *testing.T, who string, s *Store, p *lockPass, stall store.RunID) {
	t.Helper()
	formGroup(t, who, s, p, func() error {
		_, err := s.Append(context.Background(), m.epochs[stall], []store.Append{note(stall, who)})
		return err
	}, func() { m.appendTo(who, s, m.r1) }, func() { m.appendTo(who, s, m.r2) })
}

// formGroup makes s's next group the appends that members submit, each in
// a goroutine of its own: s's one committer is held at the lock pass of
// the lone append that lone submits while they queue.
func formGroup(t *testing.T, who string, s *Store, p *lockPass, lone func() error, members ...func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- lone() }()
	p.next(t, who+"'s lone append")
	for _, submit := range members {
		go submit()
	}
	waitFor(t, func() bool { return s.appends.Waiting() == len(members) })
	p.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("%s's lone append: %v", who, err)
	}
}

// collect gathers n appends' results, requires each to land at
// want[who], and requires that no group transaction of A or B failed.
func (m *mixedRace) collect(t *testing.T, n int, want map[string]store.Seq) map[store.RunID]store.Record {
	t.Helper()
	last := map[store.RunID]store.Record{}
	for range n {
		r := <-m.results
		if r.err != nil {
			t.Errorf("%s's append to %s: %v", r.who, r.run, r.err)
			continue
		}
		if r.recs[0].Seq != want[r.who] {
			t.Errorf("%s's append to %s got seq %d, want %d", r.who, r.run, r.recs[0].Seq, want[r.who])
		}
		if r.recs[0].Seq > last[r.run].Seq {
			last[r.run] = r.recs[0]
		}
	}
	for who, p := range map[string]*lockPass{"A": m.pa, "B": m.pb} {
		for _, err := range p.failed() {
			t.Errorf("%s's group's transaction failed: %v", who, err)
		}
	}
	return last
}

// TestMixedGroups_OneLockOrderNoDeadlock: a group that mixes runs its
// process remembers (written by the one-round-trip statement, known.go)
// with others takes every run's lock in its one lock pass, in run-id
// order, so that another process's writer over the same runs waits for it
// instead of each holding a run the other waits for.
//
// Process A remembers run r1 and not r2, B r2 and not r1, and A's group of
// appends to both is held just after its lock pass. Before the fix a group
// locked its ordinary runs in its lock pass and its remembered runs in a
// second pass, with its writes: A's lock pass took only r2. B's group took
// only r1 and went on to wait for r2 in its writes; a bulk seal of both
// took r1 and waited for r2. Released, A waited for r1 in its writes: a
// deadlock, which PostgreSQL broke after deadlock_timeout by aborting one
// transaction (SQLSTATE 40P01), to be retried.
func TestMixedGroups_OneLockOrderNoDeadlock(t *testing.T) {
	t.Run("two processes' groups", func(t *testing.T) {
		m := startMixedRace(t, func(run store.RunID) store.Append { return note(run, "first") })
		m.groupOf(t, "B", m.b, m.pb, m.lease(t))
		waitFor(t, func() bool { return waits(t, m.nameB, m.nameA) })
		select {
		case runs := <-m.pb.passed:
			t.Errorf("B's group of %v got past its lock pass while A's group, past its own, held its locks: "+
				"the groups took their runs in two passes, and now B waits in its writes for a run A holds", runs)
		default:
		}
		m.pa.release <- struct{}{}
		// A's group went first, so B's appends land after A's on both runs.
		m.collect(t, 4, map[string]store.Seq{"A": 2, "B": 3})
		for _, run := range []store.RunID{m.r1, m.r2} {
			if _, err := m.a.Verify(context.Background(), run); err != nil {
				t.Errorf("chain of %s: %v", run, err)
			}
		}
	})
	t.Run("a bulk seal", func(t *testing.T) {
		m := startMixedRace(t, func(run store.RunID) store.Append { return conclude(run, "succeeded") })
		type sealResult struct {
			leaves []store.Digest
			err    error
		}
		sealed := make(chan sealResult, 1)
		go func() {
			leaves, err := m.b.SealBulk(context.Background(), []store.BulkSeal{
				{Run: m.r1, Epoch: m.epochs[m.r1], Outcome: "succeeded"},
				{Run: m.r2, Epoch: m.epochs[m.r2], Outcome: "succeeded"},
			})
			sealed <- sealResult{leaves, err}
		}()
		waitFor(t, func() bool { return waits(t, m.nameB, m.nameA) })
		m.pa.release <- struct{}{}
		// A's appends land first; the seal commits to the heads they made.
		last := m.collect(t, 2, map[string]store.Seq{"A": 2})
		got := <-sealed
		if got.err != nil {
			t.Fatalf("bulk seal: %v", got.err)
		}
		for i, run := range []store.RunID{m.r1, m.r2} {
			if rec, ok := last[run]; ok && got.leaves[i] != rec.Hash {
				t.Errorf("%s sealed with leaf %s, want the head A's append made, %s", run, got.leaves[i], rec.Hash)
			}
			if _, err := m.a.Verify(context.Background(), run); err != nil {
				t.Errorf("sealed run %s: %v", run, err)
			}
		}
	})
}

// TestCrossingAdmissionClaims_OneKeyOrderNoDeadlock: a group claims its
// members' admission keys in key order, whatever the order of the runs
// claiming them, whether it writes its members with multi-row statements
// or row by row (after a refusal). A claim waits for another
// transaction's uncommitted claim of the same key, so two processes'
// groups that claim keys in crossing orders (duplicate deliveries of two
// starts, to two processes at once) would each hold a key the other waits
// for: a deadlock, which PostgreSQL breaks after deadlock_timeout
// (SQLSTATE 40P01).
//
// A's group claims k1 and k2; B's claims k2 (for its lowest run), k0 and
// k1. In run order, B claims k2 and waits at k0, which another transaction
// holds; A claims k1 and waits at k2 for B; freed, B waits at k1 for A. In
// key order B waits at k0 holding no key, and A claims both of its keys
// and commits.
func TestCrossingAdmissionClaims_OneKeyOrderNoDeadlock(t *testing.T) {
	t.Run("multi-row statements", func(t *testing.T) { crossingClaims(t, false) })
	t.Run("row by row", func(t *testing.T) { crossingClaims(t, true) })
}

// crossingClaims is TestCrossingAdmissionClaims_OneKeyOrderNoDeadlock;
// rowByRow gives B's group a fourth member whose key is taken already, so
// that its first attempt is refused and the group is written row by row,
// and holds B's third attempt: the other three, after that member's
// refusal.
func crossingClaims(t *testing.T, rowByRow bool) {
	ctx := context.Background()
	tag := strings.ToLower(ulid.Make().String())
	nameA, nameB, nameT := "claimorder-a-"+tag, "claimorder-b-"+tag, "claimorder-t-"+tag
	a := processStore(t, nameA, freshTenant())
	b := processStore(t, nameB, a.Tenant())
	epochs := map[store.RunID]store.Epoch{}
	runs := func(n int) []store.RunID {
		out := make([]store.RunID, n)
		for i := range out {
			out[i] = store.NewRunID()
			l, err := a.Acquire(ctx, out[i], "worker", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			epochs[out[i]] = l.Epoch
		}
		slices.SortFunc(out, func(x, y store.RunID) int { return strings.Compare(x.String(), y.String()) })
		return out
	}
	admit := func(run store.RunID, key string) []store.Append {
		return []store.Append{{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"` + key + `"}`)}}
	}
	ra, rb := runs(2), runs(3)
	k0, k1, k2 := "k0-"+tag, "k1-"+tag, "k2-"+tag
	// B's claims of k2 and k1 lose to A's, and of the taken key to its
	// holder; its claim of k0 lands.
	holder := map[string]store.RunID{k1: ra[0], k2: ra[1]}
	refusedKey := map[store.RunID]string{rb[0]: k2, rb[2]: k1}
	taken := "a-taken-" + tag // before k0, k1, k2 in key order
	if rowByRow {
		rx := runs(1)[0]
		if _, err := a.Append(ctx, epochs[rx], admit(rx, taken)); err != nil {
			t.Fatal(err)
		}
		holder[taken] = rx
	}

	type result struct {
		run store.RunID
		err error
	}
	results := make(chan result, 6)
	submit := func(s *Store, done *atomic.Int32, run store.RunID, key string) func() {
		return func() {
			_, err := s.Append(ctx, epochs[run], admit(run, key))
			done.Add(1)
			results <- result{run, err}
		}
	}
	lone := func(s *Store) func() error {
		run := runs(1)[0]
		return func() error {
			_, err := s.Append(ctx, epochs[run], []store.Append{note(run, "lone")})
			return err
		}
	}
	var aDone, bDone atomic.Int32
	bGroup := []func(){submit(b, &bDone, rb[0], k2), submit(b, &bDone, rb[1], k0), submit(b, &bDone, rb[2], k1)}
	bHold := []int{1, 2}
	if rowByRow {
		rt := runs(1)[0]
		refusedKey[rt] = taken
		bGroup = append(bGroup, submit(b, &bDone, rt, taken))
		bHold = []int{1, 4}
	}
	pa := standAtLockPass(t, a, 1, 2)
	pb := standAtLockPass(t, b, bHold...)
	formGroup(t, "A", a, pa, lone(a), submit(a, &aDone, ra[0], k1), submit(a, &aDone, ra[1], k2))
	pa.next(t, "A's group")
	formGroup(t, "B", b, pb, lone(b), bGroup...)
	pb.next(t, "B's group")
	if rowByRow {
		pb.next(t, "B's group row by row")
		pb.next(t, "B's group row by row, after the taken key's refusal")
		waitFor(t, func() bool { return bDone.Load() == 1 }) // the taken key's refusal, checked below
	}

	// Another transaction holds k0, uncommitted.
	tx, err := testPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT set_config('application_name', $1, true)`, nameT); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO runseal_test.admissions(tenant, key, run, claimed_at) VALUES($1, $2, $3, clock_timestamp())`, a.Tenant(), k0, rb[1].String()); err != nil {
		t.Fatal(err)
	}
	pb.release <- struct{}{}
	waitFor(t, func() bool { return waits(t, nameB, nameT) })
	pa.release <- struct{}{}
	waitFor(t, func() bool { return aDone.Load() == 2 || waits(t, nameA, nameB) })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	for range 2 + len(bGroup) {
		r := <-results
		key, refused := refusedKey[r.run]
		var de *store.DuplicateAdmissionError
		switch {
		case !refused && r.err != nil:
			t.Errorf("append to %s: %v", r.run, r.err)
		case refused && (!errors.As(r.err, &de) || de.Key != key || de.Holder != holder[key]):
			t.Errorf("append to %s: %v; want key %q refused, held by %s", r.run, r.err, key, holder[key])
		}
	}
	// (Transactions refused for a taken key are expected: they are how
	// the losing claims find out.)
	for who, p := range map[string]*lockPass{"A": pa, "B": pb} {
		for _, err := range p.failed() {
			if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "40P01" {
				t.Errorf("%s's group's transaction failed: %v", who, err)
			}
		}
	}
}

// TestOneBatchTwoClaims_KeyOrder: a batch that claims two admission keys
// claims them in key order, whatever its records' order, written row by
// row (AppendAtomic, a group after a refusal) or with a group's multi-row
// statements. In its records' order it could cross another transaction's
// claims of the same keys in key order, and the two would deadlock.
func TestOneBatchTwoClaims_KeyOrder(t *testing.T) {
	s := &Store{q: newQueries("runseal_test"), tenant: "t"}
	run := store.NewRunID()
	admit := func(key string) store.Append {
		return store.Append{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"` + key + `"}`)}
	}
	p, err := s.planAppend(locked{}, run, 1, []store.Append{admit("k2"), admit("k1")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		queue func(b *pgx.Batch)
	}{
		{"row by row", func(b *pgx.Batch) { s.queue(p, b) }},
		{"multi-row", func(b *pgx.Batch) { s.queueMany([]*appendPlan{p}, b) }},
	} {
		b := &pgx.Batch{}
		tc.queue(b)
		var keys []string
		for _, q := range b.QueuedQueries {
			if q.SQL == s.q.claimAdmission {
				keys = append(keys, q.Arguments[1].(string))
			}
		}
		if !slices.Equal(keys, []string{"k1", "k2"}) {
			t.Errorf("%s: claims %v, want [k1 k2]", tc.name, keys)
		}
	}
}
