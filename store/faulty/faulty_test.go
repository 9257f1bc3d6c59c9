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
	runOnce := func(seed uint64) ([]faulty.Injected, []string) {
		s, _ := openSQLite(t)
		j := faulty.New(s, faulty.Options{Seed: seed, FailBeforeCommit: 0.2, LoseAck: 0.2})
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
