package faulty_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/faulty"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/store/storetest"
)

func openSQLite(tb testing.TB) (*sqlite.Store, *storetest.FakeClock) {
	tb.Helper()
	clk := storetest.NewFakeClock()
	s, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "journal.db"), sqlite.Options{Now: clk.Now})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, clk
}

// TestConformanceFaultsOff: with no fault scheduled the decorator is the
// store it wraps, optional interfaces included.
func TestConformanceFaultsOff(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		s, clk := openSQLite(tb)
		return faulty.New(s, faulty.Options{Seed: 1}), clk
	}})
}

func note(run store.RunID) store.Append {
	return store.Append{Run: run, Kind: "Note", Fields: []byte(`{"n":1}`)}
}

// TestSchedule_ReplaysFromSeed: the same seed gives the same faults at the
// same operations, and every injected error carries the seed.
func TestSchedule_ReplaysFromSeed(t *testing.T) {
	ctx := context.Background()
	runOnce := func(seed uint64) ([]faulty.Op, []string) {
		s, _ := openSQLite(t)
		j := faulty.New(s, faulty.Options{Seed: seed, FailBeforeCommit: 0.2, LoseAck: 0.2, FailInTx: 0.1})
		var msgs []string
		run := store.NewRunID()
		for i := 0; i < 60; i++ {
			if _, err := j.Append(ctx, 1, []store.Append{note(run)}); err != nil {
				msgs = append(msgs, err.Error())
				if !errors.Is(err, faulty.ErrInjected) {
					t.Fatalf("op %d: a non-injected failure: %v", i, err)
				}
			}
		}
		return j.Injected(), msgs
	}
	a, msgs := runOnce(42)
	b, _ := runOnce(42)
	c, _ := runOnce(43)
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Fatalf("seed 42 gave different schedules: %v vs %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same schedule")
	}
	for _, m := range msgs {
		if !strings.Contains(m, "Seed: 42") {
			t.Errorf("a failure message does not carry its replayable seed: %s", m)
		}
	}
}

// TestLoseAck_CommittedThenRetriedStaysExactlyOnce is the fault the
// decorator exists for: the effect committed, the caller heard "unknown",
// and its retry must be refused as a duplicate, not written twice.
func TestLoseAck_CommittedThenRetriedStaysExactlyOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := openSQLite(t)
	j := faulty.New(s, faulty.Options{Seed: 7, At: map[uint64]faulty.Fault{1: faulty.LoseAck, 4: faulty.LoseAck}})
	run := store.NewRunID()
	k := store.Sum([]byte("charge card"))
	eff := store.Append{Run: run, Kind: store.KindEffectStarted, EffectKey: &k, Fields: []byte(`{}`)}
	_, err := j.Append(ctx, 1, []store.Append{eff})
	var cu *store.CommitUnknownError
	if !errors.As(err, &cu) || !errors.Is(err, faulty.ErrInjected) {
		t.Fatalf("lost ack = %v, want a CommitUnknownError wrapping the injected fault", err)
	}
	if h, _ := s.Head(ctx, run); h.Seq != 1 {
		t.Fatalf("the write behind a lost ack did not commit (head %d)", h.Seq)
	}
	_, err = j.Append(ctx, 1, []store.Append{eff})
	var dup *store.DuplicateEffectError
	if !errors.As(err, &dup) {
		t.Fatalf("retry after a lost ack = %v, want DuplicateEffectError", err)
	}
	// First seal wins: a seal whose ack was lost, retried, gives one leaf.
	if _, err := j.Append(ctx, 1, []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatal(err) // op 3
	}
	if _, err := j.Seal(ctx, run, 1, "succeeded"); !errors.As(err, &cu) {
		t.Fatalf("seal (op 4) = %v, want a lost ack", err)
	}
	d1, err := j.Seal(ctx, run, 1, "succeeded")
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := s.Checkpoint(ctx)
	if cp.Size != 1 || d1 == (store.Digest{}) {
		t.Errorf("re-seal after a lost ack: log size %d, want 1", cp.Size)
	}
}

func TestClosed_FailsEveryLaterCall(t *testing.T) {
	ctx := context.Background()
	s, _ := openSQLite(t)
	j := faulty.New(s, faulty.Options{Seed: 9, At: map[uint64]faulty.Fault{2: faulty.Closed}})
	run := store.NewRunID()
	if _, err := j.Append(ctx, 1, []store.Append{note(run)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_, err := j.Read(ctx, run, 1)
		if !errors.Is(err, store.ErrClosed) || !strings.Contains(err.Error(), "Seed: 9") {
			t.Fatalf("call %d after close = %v, want store.ErrClosed with the seed", i, err)
		}
	}
}

func TestFailBeforeCommit_WritesNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openSQLite(t)
	j := faulty.New(s, faulty.Options{Seed: 3, At: map[uint64]faulty.Fault{1: faulty.FailBeforeCommit}})
	run := store.NewRunID()
	_, err := j.Append(ctx, 1, []store.Append{note(run)})
	var ie *faulty.InjectedError
	if !errors.As(err, &ie) || ie.Fault != faulty.FailBeforeCommit || ie.Op != 1 || ie.Method != "Append" {
		t.Fatalf("err = %v, want the injected fail-before-commit of op 1", err)
	}
	if h, _ := s.Head(ctx, run); h.Seq != 0 {
		t.Fatalf("a write failed before commit left head %d", h.Seq)
	}
}

// TestShared_LifecycleRefusesSharedStore: JournalStorage serialises a
// study in one process and must refuse a store several processes write.
func TestShared_LifecycleRefusesSharedStore(t *testing.T) {
	s, _ := openSQLite(t)
	js, err := journalstore.New(s)
	if err != nil {
		t.Fatalf("single-writer store refused: %v", err)
	}
	js.Close()
	_, err = journalstore.New(faulty.NewShared(s))
	if !errors.Is(err, lifecycle.ErrUnsupported) {
		t.Fatalf("journalstore.New(shared) = %v, want lifecycle.ErrUnsupported", err)
	}
}

// TestShared_DelegatesEverythingElse: the double is the store in every
// other respect, so the suite passes through it.
func TestShared_DelegatesEverythingElse(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		s, clk := openSQLite(tb)
		return faulty.NewShared(s), clk
	}})
}

// TestFailurePoints_SQLite: each of the three points a write can fail at,
// through AppendAtomic, over SQLite.
func TestFailurePoints_SQLite(t *testing.T) {
	testFailurePoints(t, func(tb testing.TB) store.Journal { s, _ := openSQLite(tb); return s })
}

// testFailurePoints proves each point a write can fail at, on a fresh
// journal from open: before the transaction (the caller's work never
// runs, nothing is written), inside it after the work ran (what the work
// wrote in the transaction rolls back with the records), after the commit
// (everything is written and the caller hears CommitUnknownError). Every
// failure names the fault, the operation and the replayable seed.
func testFailurePoints(t *testing.T, open func(testing.TB) store.Journal) {
	ctx := context.Background()
	table := "faulty_marks_" + strings.ToLower(store.NewRunID().String())
	cases := []struct {
		fault     faulty.Fault
		workRan   bool
		committed bool
	}{
		{faulty.FailBeforeCommit, false, false},
		{faulty.FailInTx, true, false},
		{faulty.LoseAck, true, true},
		{faulty.None, true, true},
	}
	for _, c := range cases {
		t.Run(c.fault.String(), func(t *testing.T) {
			inner := open(t)
			if inner.Atomic() == nil {
				t.Skip("the store has no atomic appends")
			}
			j := faulty.New(inner, faulty.Options{Seed: 11})
			run := store.NewRunID()
			ran := 0
			atomicAppend := func(a store.AtomicJournal) error {
				_, err := a.AppendAtomic(ctx, run, 1, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
					ran++
					if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (run TEXT NOT NULL)"); err != nil {
						return nil, err
					}
					if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (run) VALUES ("+placeholder(inner)+")", run.String()); err != nil {
						return nil, err
					}
					return []store.Append{note(run)}, nil
				})
				return err
			}
			// A first append (not faulted) makes the table, so that
			// counting its rows works whatever the fault.
			if err := atomicAppend(j.Atomic()); err != nil {
				t.Fatal(err)
			}
			j.Schedule(faulty.Options{Seed: 11, At: map[uint64]faulty.Fault{1: c.fault}})
			ran = 0
			err := atomicAppend(j.Atomic())
			if c.fault == faulty.None {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				var ie *faulty.InjectedError
				if !errors.As(err, &ie) || ie.Fault != c.fault || ie.Op != 1 || ie.Method != "AppendAtomic" ||
					!strings.Contains(err.Error(), "Seed: 11") || !strings.Contains(err.Error(), c.fault.String()) {
					t.Fatalf("err = %v, want the injected %s of op 1 with its seed", err, c.fault)
				}
				var cu *store.CommitUnknownError
				if errors.As(err, &cu) != (c.fault == faulty.LoseAck) {
					t.Fatalf("err = %v: CommitUnknownError %t, want %t", err, errors.As(err, &cu), c.fault == faulty.LoseAck)
				}
			}
			if (ran == 1) != c.workRan {
				t.Errorf("the caller's work ran %d times, want ran=%t", ran, c.workRan)
			}
			want := 1
			if c.committed {
				want = 2
			}
			if h, err := inner.Head(ctx, run); err != nil || h.Seq != store.Seq(want) {
				t.Errorf("head %d (%v), want %d", h.Seq, err, want)
			}
			var rows int
			_, err = inner.Atomic().AppendAtomic(ctx, run, 1, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
				if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE run = "+placeholder(inner), run.String()).Scan(&rows); err != nil {
					return nil, err
				}
				return nil, errCount
			})
			if !errors.Is(err, errCount) {
				t.Fatal(err)
			}
			if rows != want {
				t.Errorf("the work's rows: %d, want %d (they commit or roll back with the records)", rows, want)
			}
			if c.fault != faulty.None {
				got := j.Injected()
				if len(got) != 1 || got[0].Fault != c.fault || (c.workRan && got[0].Detail != "Note") {
					t.Errorf("injected %v", got)
				}
			}
		})
	}
	// A plain write has no work inside its transaction: FailInTx writes
	// nothing, as FailBeforeCommit does.
	t.Run("plain-append", func(t *testing.T) {
		inner := open(t)
		j := faulty.New(inner, faulty.Options{Seed: 12, At: map[uint64]faulty.Fault{1: faulty.FailInTx}})
		run := store.NewRunID()
		_, err := j.Append(ctx, 1, []store.Append{note(run)})
		var ie *faulty.InjectedError
		if !errors.As(err, &ie) || ie.Fault != faulty.FailInTx || !strings.Contains(err.Error(), "Seed: 12") {
			t.Fatalf("err = %v", err)
		}
		if h, _ := inner.Head(ctx, run); h.Seq != 0 {
			t.Fatalf("head %d after a write failed in its transaction", h.Seq)
		}
	})
}

var errCount = errors.New("counted; roll back")

// placeholder is the store's SQL parameter marker.
func placeholder(j store.Journal) string {
	if _, ok := j.(*sqlite.Store); ok {
		return "?"
	}
	return "$1"
}

// TestOnly_NumbersOnlyItsMethods: with Only, reads between writes take no
// number, so "the n-th write" is the n-th write; Trace lists the numbered
// operations with the kind appended, and Schedule starts numbering again.
func TestOnly_NumbersOnlyItsMethods(t *testing.T) {
	ctx := context.Background()
	s, _ := openSQLite(t)
	j := faulty.New(s, faulty.Options{Seed: 5, Only: []string{"Append", "Seal"}, Trace: true, At: map[uint64]faulty.Fault{3: faulty.FailBeforeCommit}})
	run := store.NewRunID()
	for i := 0; i < 2; i++ {
		if _, err := j.Append(ctx, 1, []store.Append{note(run)}); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Head(ctx, run); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Read(ctx, run, 1); err != nil {
			t.Fatal(err)
		}
	}
	_, err := j.Append(ctx, 1, []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}})
	var ie *faulty.InjectedError
	if !errors.As(err, &ie) || ie.Op != 3 {
		t.Fatalf("the third write = %v, want the fault scheduled at op 3", err)
	}
	want := []faulty.Op{{N: 1, Method: "Append", Detail: "Note"}, {N: 2, Method: "Append", Detail: "Note"},
		{N: 3, Method: "Append", Detail: store.KindRunConcluded, Fault: faulty.FailBeforeCommit}}
	if got := j.Ops(); !slices.Equal(got, want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
	j.Schedule(faulty.Options{Seed: 6, Only: []string{"Seal"}, At: map[uint64]faulty.Fault{1: faulty.Closed}})
	if _, err := j.Append(ctx, 1, []store.Append{note(run)}); err != nil {
		t.Fatalf("an append outside Only: %v", err)
	}
	if _, err := j.Seal(ctx, run, 1, "succeeded"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("seal = %v, want closed", err)
	}
	if _, err := j.Read(ctx, run, 1); !errors.Is(err, store.ErrClosed) || !strings.Contains(err.Error(), "Seed: 6") {
		t.Fatalf("a read outside Only after Closed = %v, want closed with the seed", err)
	}
}

// TestBulk_FailsOnSchedule: the bulk writes of a BulkJournal take numbers
// and fail like the others.
func TestBulk_FailsOnSchedule(t *testing.T) {
	ctx := context.Background()
	s, _ := openSQLite(t)
	j := faulty.NewBulk(s, faulty.Options{Seed: 8, At: map[uint64]faulty.Fault{1: faulty.FailBeforeCommit, 2: faulty.LoseAck}})
	run := store.NewRunID()
	bulk := []store.BulkAppend{{Epoch: 1, Batch: []store.Append{note(run)}}}
	if _, err := j.AppendBulk(ctx, bulk); !errors.Is(err, faulty.ErrInjected) {
		t.Fatalf("bulk 1 = %v", err)
	}
	if h, _ := s.Head(ctx, run); h.Seq != 0 {
		t.Fatalf("head %d after a failed bulk", h.Seq)
	}
	var cu *store.CommitUnknownError
	if _, err := j.AppendBulk(ctx, bulk); !errors.As(err, &cu) {
		t.Fatalf("bulk 2 = %v", err)
	}
	if h, _ := s.Head(ctx, run); h.Seq != 1 {
		t.Fatalf("head %d after a bulk whose ack was lost", h.Seq)
	}
	if got := j.Injected(); len(got) != 2 || got[0].Method != "AppendBulk" {
		t.Fatalf("injected %v", got)
	}
}
