package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/store"
)

func note(run store.RunID, text string) store.Append {
	return store.Append{Run: run, Kind: "Note", Fields: []byte(fmt.Sprintf(`{"text":%q}`, text))}
}

func conclude(run store.RunID, outcome string) store.Append {
	return store.Append{Run: run, Kind: store.KindRunConcluded, Fields: []byte(fmt.Sprintf(`{"outcome":%q}`, outcome))}
}

func effect(run store.RunID, key string) store.Append {
	k := store.Sum([]byte(key))
	return store.Append{Run: run, Kind: store.KindEffectStarted, EffectKey: &k}
}

// sqlExec runs SQL behind the store's back, as an attacker or an operator
// with database access would.
func sqlExec(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	tag, err := testPool(t).Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
	return tag.RowsAffected()
}

// secondPool is another pool on the test server: to the database it is
// another process.
func secondPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg := testPool(t).Config().Copy()
	cfg.MaxConns = maxConns
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestIsShared(t *testing.T) {
	s := openStore(t, Options{})
	if !s.IsShared() || s.Seals() || s.Atomic() == nil {
		t.Fatalf("IsShared %v, Seals %v, Atomic %v", s.IsShared(), s.Seals(), s.Atomic())
	}
}

func TestTamperedRecordIsCorrupt(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "a"), note(run, "b"), note(run, "c")}); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, `UPDATE runseal_test.records SET raw = convert_to(replace(convert_from(raw, 'UTF8'), '"b"', '"B"'), 'UTF8') WHERE tenant = $1 AND seq = 2`, s.Tenant())
	var c *store.CorruptError
	if _, err := s.Read(ctx, run, 1); !errors.As(err, &c) || c.Seq != 2 {
		t.Fatalf("Read of tampered run: %v", err)
	}
	if _, err := s.Verify(ctx, run); !errors.As(err, &c) || c.Seq != 2 {
		t.Fatalf("Verify of tampered run: %v", err)
	}
}

func TestDeletedRecordIsCorrupt(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "a"), note(run, "b"), note(run, "c")}); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, `DELETE FROM runseal_test.records WHERE tenant = $1 AND seq = 3`, s.Tenant())
	var c *store.CorruptError
	if _, err := s.Verify(ctx, run); !errors.As(err, &c) {
		t.Fatalf("Verify of truncated run: %v", err)
	}
	if _, err := s.Read(ctx, run, 1); !errors.As(err, &c) {
		t.Fatalf("Read of truncated run: %v", err)
	}
	sqlExec(t, `DELETE FROM runseal_test.records WHERE tenant = $1 AND seq = 2`, s.Tenant())
	if _, err := s.ReadPage(ctx, run, 1, 5); !errors.As(err, &c) {
		t.Fatalf("ReadPage across a gap: %v", err)
	}
}

func TestUnparseableStoredIDIsCorrupt(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{conclude(run, "quarantined")}); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, `UPDATE runseal_test.runs SET run = 'not-a-ulid' WHERE tenant = $1`, s.Tenant())
	var c *store.CorruptError
	for name, call := range map[string]func() error{
		"RunsByOutcome": func() error { _, err := s.RunsByOutcome(ctx, "quarantined", 10); return err },
		"RecentRuns":    func() error { _, err := s.RecentRuns(ctx, nil, 10); return err },
		"RunsByID":      func() error { _, err := s.RunsByID(ctx, nil, 10); return err },
	} {
		if err := call(); !errors.As(err, &c) {
			t.Errorf("%s with an unparseable stored id: %v, want CorruptError", name, err)
		}
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	ctx := context.Background()
	a := openStore(t, Options{})
	b := openStore(t, Options{})
	if strings.TrimSuffix(a.Origin(), "/"+a.Tenant())+"/"+b.Tenant() != b.Origin() || a.Origin() == b.Origin() {
		t.Fatalf("origins %q and %q", a.Origin(), b.Origin())
	}
	ra, rb := store.NewRunID(), store.NewRunID()
	adm := func(run store.RunID) store.Append {
		return store.Append{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"same-key"}`)}
	}
	if _, err := a.Append(ctx, 1, []store.Append{adm(ra)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, 1, []store.Append{adm(rb)}); err != nil {
		t.Fatalf("the same admission key in another tenant is ordinary: %v", err)
	}
	if h, _ := b.Head(ctx, ra); h.Seq != 0 {
		t.Errorf("tenant b sees tenant a's run")
	}
	if got, _ := b.RunsByID(ctx, nil, 10); len(got) != 1 || got[0] != rb {
		t.Errorf("tenant b lists %v", got)
	}
	for _, r := range []store.RunID{ra, rb} {
		if _, err := a.Append(ctx, 1, []store.Append{conclude(r, "succeeded")}); err != nil && r == ra {
			t.Fatal(err)
		}
	}
	if _, err := a.Seal(ctx, ra, 1, "succeeded"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, 1, []store.Append{conclude(rb, "succeeded")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Seal(ctx, rb, 1, "succeeded"); err != nil {
		t.Fatal(err)
	}
	pa, _ := a.LogPositions(ctx, []store.RunID{ra})
	pb, _ := b.LogPositions(ctx, []store.RunID{rb})
	if pa[0] == nil || pb[0] == nil || pa[0].Index != 0 || pb[0].Index != 0 {
		t.Errorf("each tenant's log starts at 0: %+v %+v", pa[0], pb[0])
	}
}

func TestOriginFixedAtCreation(t *testing.T) {
	ctx := context.Background()
	schema := "runseal_o" + strings.ToLower(freshTenant()[1:12])
	t.Cleanup(func() { sqlExec(t, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`) })
	s := openStore(t, Options{Schema: schema, Origin: "example.com/log"})
	if s.Origin() != "example.com/log/"+s.Tenant() {
		t.Fatalf("origin %q", s.Origin())
	}
	if _, err := New(ctx, testPool(t), Options{Schema: schema, Origin: "example.com/other"}); err == nil {
		t.Fatal("origin changed on reopen")
	}
	s2 := openStore(t, Options{Schema: schema, Tenant: "default"})
	if s2.Origin() != "example.com/log" {
		t.Fatalf("origin %q after reopen", s2.Origin())
	}
	if _, err := New(ctx, testPool(t), Options{Schema: schema + "x", Origin: "has space"}); err == nil {
		t.Fatal("origin with a space accepted")
	}
	for _, bad := range []string{"Upper", "pg_x", "a-b", "1a", `x"y`} {
		if _, err := New(ctx, testPool(t), Options{Schema: bad}); err == nil {
			t.Errorf("schema %q accepted", bad)
		}
	}
}

func TestSchemaMigrations(t *testing.T) {
	ctx := context.Background()
	schema := "runseal_m" + strings.ToLower(freshTenant()[1:12])
	t.Cleanup(func() { sqlExec(t, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`) })
	// Processes opening a fresh database together: one migrates, all agree.
	var wg sync.WaitGroup
	origins := make([]string, 8)
	errs := make([]error, 8)
	for i := range origins {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := secondPool(t, 2)
			s, err := New(ctx, p, Options{Schema: schema})
			if err == nil {
				origins[i] = s.Origin()
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	for i := range origins {
		if errs[i] != nil || origins[i] != origins[0] {
			t.Fatalf("concurrent open %d: origin %q err %v (first %q)", i, origins[i], errs[i], origins[0])
		}
	}
	var versions int
	if err := testPool(t).QueryRow(ctx, `SELECT count(*) FROM `+schema+`.migrations`).Scan(&versions); err != nil || versions != SchemaVersion {
		t.Fatalf("migrations recorded %d times (%v), want %d", versions, err, SchemaVersion)
	}
	sqlExec(t, `INSERT INTO `+schema+`.migrations(version, description) VALUES($1, 'from the future')`, SchemaVersion+1)
	_, err := New(ctx, testPool(t), Options{Schema: schema})
	var tn *SchemaTooNewError
	if !errors.As(err, &tn) || tn.Have != SchemaVersion+1 || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	s.Close()
	if _, err := s.Append(ctx, 1, []store.Append{note(store.NewRunID(), "x")}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := s.Head(ctx, store.NewRunID()); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("head after close: %v", err)
	}
}

func TestCancelledContextWritesNothing(t *testing.T) {
	s := openStore(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "a")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with cancelled ctx: %v", err)
	}
	if h, _ := s.Head(context.Background(), run); h.Seq != 0 {
		t.Fatal("cancelled append wrote")
	}
}

// TestTwoProcessesOneRun races appends to one run from two pools (to the
// database, two processes): the lease row lock serializes them into one
// contiguous chain.
func TestTwoProcessesOneRun(t *testing.T) {
	ctx := context.Background()
	tenant := freshTenant()
	var stores []*Store
	for i := 0; i < 2; i++ {
		s, err := New(ctx, secondPool(t, 8), Options{Tenant: tenant, Schema: "runseal_test"})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	run := store.NewRunID()
	const writers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers*each)
	for _, s := range stores {
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(s *Store, w int) {
				defer wg.Done()
				for i := 0; i < each; i++ {
					batch := []store.Append{note(run, "x"), effect(run, fmt.Sprintf("%p-%d-%d", s, w, i))}
					if _, err := s.Append(ctx, 1, batch); err != nil {
						errs <- err
					}
				}
			}(s, w)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	h, err := stores[0].Head(ctx, run)
	if err != nil || h.Seq != 2*writers*each*2 {
		t.Fatalf("head %+v %v, want seq %d", h, err, 2*writers*each*2)
	}
	if d, err := stores[1].Verify(ctx, run); err != nil || d != h.Hash {
		t.Fatalf("verify: %v %v", d, err)
	}
}

// TestLogIndexGaplessUnderConcurrency seals many runs at once from two
// pools, with some seals refused mid-transaction, and checks the tenant's
// log indexes are exactly 0..n-1.
func TestLogIndexGaplessUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	tenant := freshTenant()
	var stores []*Store
	for i := 0; i < 2; i++ {
		s, err := New(ctx, secondPool(t, 16), Options{Tenant: tenant, Schema: "runseal_test"})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	const n = 60
	runs := make([]store.RunID, n)
	for i := range runs {
		runs[i] = store.NewRunID()
		outcome := "succeeded"
		if i%5 == 0 {
			outcome = "failed" // refused: does not seal
		}
		if _, err := stores[0].Append(ctx, 1, []store.Append{note(runs[i], "x"), conclude(runs[i], outcome)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i, r := range runs {
		for _, s := range stores { // both race to seal each run
			wg.Add(1)
			go func(s *Store, i int, r store.RunID) {
				defer wg.Done()
				_, err := s.Seal(ctx, r, 1, "succeeded")
				var ia *store.InvalidArgumentError
				if (i%5 == 0) != errors.As(err, &ia) || (i%5 != 0 && err != nil) {
					t.Errorf("seal %d: %v", i, err)
				}
			}(s, i, r)
		}
	}
	wg.Wait()
	pos, err := stores[1].LogPositions(ctx, runs)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for i, p := range pos {
		if (p == nil) != (i%5 == 0) {
			t.Fatalf("run %d position %+v", i, p)
		}
		if p != nil {
			idx = append(idx, int(p.Index))
			h, _ := stores[0].Head(ctx, runs[i])
			if p.Leaf != h.Hash {
				t.Errorf("run %d leaf is not its head", i)
			}
		}
	}
	sort.Ints(idx)
	for i, x := range idx {
		if x != i {
			t.Fatalf("log indexes %v: gap or duplicate at %d", idx, i)
		}
	}
	var size int64
	if err := testPool(t).QueryRow(ctx, `SELECT size FROM runseal_test.logs WHERE tenant = $1`, tenant).Scan(&size); err != nil || size != int64(len(idx)) {
		t.Fatalf("log size %d (%v), want %d", size, err, len(idx))
	}
}

// TestLeaseJudgedByDatabaseClock: a lease's expiry is the database's
// clock plus the TTL, whatever the client's clock says.
func TestLeaseJudgedByDatabaseClock(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	// The database's clock on either side of the acquire bounds its now,
	// however long the acquire took.
	dbNow := func() time.Time {
		var now time.Time
		if err := testPool(t).QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}
	before := dbNow()
	l, err := s.Acquire(ctx, store.NewRunID(), "a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after := dbNow()
	if l.Expires.Before(before.Add(10*time.Second)) || l.Expires.After(after.Add(10*time.Second)) {
		t.Fatalf("expiry %v is not the database's now (between %v and %v) plus 10s", l.Expires, before, after)
	}
}

func TestLostCommitAcknowledgementIsCommitUnknown(t *testing.T) {
	ctx := context.Background()
	cut, cfg := newCommitCutter(t, testPool(t).Config())
	cfg.MaxConns = 4
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s, err := New(ctx, p, Options{Tenant: freshTenant(), Schema: "runseal_test"})
	if err != nil {
		t.Fatal(err)
	}
	direct := openStore(t, Options{Tenant: s.Tenant()})
	for _, tc := range []struct {
		name   string
		mode   int32
		landed bool
	}{{"commit landed", cutAfter, true}, {"commit never arrived", cutBefore, false}} {
		t.Run(tc.name, func(t *testing.T) {
			run := store.NewRunID()
			if _, err := s.Append(ctx, 1, []store.Append{note(run, "first")}); err != nil {
				t.Fatal(err)
			}
			cut.Arm(tc.mode)
			_, err := s.Append(ctx, 1, []store.Append{note(run, "second"), effect(run, "charge")})
			var cu *store.CommitUnknownError
			if !errors.As(err, &cu) {
				t.Fatalf("append whose COMMIT acknowledgement was lost: %v (%T), want CommitUnknownError", err, err)
			}
			if !strings.Contains(err.Error(), run.String()) {
				t.Errorf("error does not name the run: %v", err)
			}
			if cut.Cuts.Load() == 0 {
				t.Fatal("the proxy never saw the COMMIT")
			}
			cut.Cuts.Store(0)
			want := store.Seq(1)
			if tc.landed {
				want = 3
			}
			if h, err := direct.Head(ctx, run); err != nil || h.Seq != want {
				t.Fatalf("head after the in-doubt commit = %+v, %v; want seq %d", h, err, want)
			}
			// The store carries on; a retry of the in-doubt effect is
			// refused exactly when it had landed.
			_, err = s.Append(ctx, 1, []store.Append{effect(run, "charge")})
			var de *store.DuplicateEffectError
			if tc.landed != errors.As(err, &de) || (!tc.landed && err != nil) {
				t.Fatalf("retrying the in-doubt effect: %v (landed %v)", err, tc.landed)
			}
			if _, err := direct.Verify(ctx, run); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAlteredLogNodeRefusesSeal: a seal extends the stored tree; if a node
// it builds on was altered, the new nodes disagree with the stored ones at
// some position, and the seal fails whole instead of committing a leaf
// onto a forged tree.
func TestAlteredLogNodeRefusesSeal(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	seal := func(i int) error {
		run := store.NewRunID()
		if _, err := s.Append(ctx, 1, []store.Append{note(run, fmt.Sprint(i)), conclude(run, "succeeded")}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Seal(ctx, run, 1, "succeeded")
		return err
	}
	for i := 0; i < 3; i++ {
		if err := seal(i); err != nil {
			t.Fatal(err)
		}
	}
	// Pre-plant the node the next seal completes (level 2, index 0), with
	// a wrong hash.
	sqlExec(t, `INSERT INTO runseal_test.log_nodes(tenant, level, idx, hash) VALUES($1, 2, 0, $2)`, s.Tenant(), make([]byte, 32))
	err := seal(3)
	var c *store.CorruptError
	if !errors.As(err, &c) {
		t.Fatalf("seal onto an altered log: %v, want CorruptError", err)
	}
	if cp, err := s.Checkpoint(ctx); err != nil || cp.Size != 3 {
		t.Fatalf("after the refused seal: %+v %v, want size 3", cp, err)
	}
}

// TestRacingRestoredAdmissions: restores (raw records) claiming one
// admission key race like live admissions do: exactly one wins and the
// others are told who holds the key.
func TestRacingRestoredAdmissions(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{Committers: 1})
	// Hold the only committer on a run locked by an atomic append, so the
	// restores queue up and are taken as one group.
	blocker := store.NewRunID()
	release, started := make(chan struct{}), make(chan int, 1)
	go s.Atomic().AppendAtomic(ctx, blocker, 1, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return nil, err
		}
		started <- pid
		<-release
		return []store.Append{note(blocker, "held")}, nil
	})
	holder := <-started
	held := make(chan error, 1)
	go func() { _, err := s.Append(ctx, 1, []store.Append{note(blocker, "waits")}); held <- err }()
	// The committer has taken that append once it waits for the run's lock.
	waitFor(t, func() bool {
		var n int
		err := testPool(t).QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, holder).Scan(&n)
		return err == nil && n > 0
	})
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			run := store.NewRunID()
			raw, err := store.EncodeBody(store.Body{Seq: 1, Run: run, Epoch: 1, V: store.RecordVersion, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"restored-key"}`)})
			if err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = s.Append(ctx, 1, []store.Append{{Run: run, Raw: raw}})
		}(i)
	}
	waitFor(t, func() bool { return s.appends.Waiting() == n })
	close(release)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	won := 0
	for i, err := range errs {
		var da *store.DuplicateAdmissionError
		switch {
		case err == nil:
			won++
		case !errors.As(err, &da):
			t.Errorf("restore %d: %v, want success or DuplicateAdmission", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d restores claimed one key", won)
	}
}
