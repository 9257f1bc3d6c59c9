package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// knownPair is two handles on one tenant (two processes of one
// deployment) and a run leased by the first, which has appended to it once,
// so that it remembers the run and its next append takes the one-round-trip
// way (known.go).
func knownPair(t *testing.T) (a, b *Store, run store.RunID, epoch store.Epoch) {
	t.Helper()
	ctx := context.Background()
	a = openStore(t, Options{})
	b = openStore(t, Options{Tenant: a.Tenant()})
	run = store.NewRunID()
	l, err := a.Acquire(ctx, run, "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, l.Epoch, []store.Append{note(run, "first")}); err != nil {
		t.Fatal(err)
	}
	if k, ok := a.known.get(run); !ok || k.head.Seq != 1 || k.epoch != l.Epoch {
		t.Fatalf("after its append the store remembers %+v, %v; want head 1 under epoch %d", k, ok, l.Epoch)
	}
	return a, b, run, l.Epoch
}

// TestAppendKnown_RunMovedElsewhere: a run another process appended to
// since this store's last write is written on its real head, not on the
// remembered one (which would fork the chain or collide with the other
// process's record).
func TestAppendKnown_RunMovedElsewhere(t *testing.T) {
	ctx := context.Background()
	a, b, run, epoch := knownPair(t)
	if _, err := b.Append(ctx, epoch, []store.Append{note(run, "elsewhere")}); err != nil {
		t.Fatal(err)
	}
	recs, err := a.Append(ctx, epoch, []store.Append{note(run, "here")})
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Seq != 3 {
		t.Fatalf("append after another process's got seq %d, want 3", recs[0].Seq)
	}
	if _, err := a.Verify(ctx, run); err != nil {
		t.Fatalf("chain after a stale remembered head: %v", err)
	}
	// And the store remembers the new head: the next append is the quick way again.
	if k, ok := a.known.get(run); !ok || k.head.Seq != 3 {
		t.Fatalf("remembered %+v, %v after the retry; want head 3", k, ok)
	}
	if recs, err := a.Append(ctx, epoch, []store.Append{note(run, "again")}); err != nil || recs[0].Seq != 4 {
		t.Fatalf("next append: %v, %v", recs, err)
	}
}

// TestAppendKnown_FencedAfterNewLease: the fence holds for a run the store
// remembers under the old epoch: once another holder has a newer lease, an
// append under the old one is refused and writes nothing.
func TestAppendKnown_FencedAfterNewLease(t *testing.T) {
	ctx := context.Background()
	a, b, run, epoch := knownPair(t)
	if err := a.ReleaseLease(ctx, run, epoch); err != nil {
		t.Fatal(err)
	}
	l, err := b.Acquire(ctx, run, "b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Append(ctx, epoch, []store.Append{note(run, "stale holder")})
	var fe *store.FencedError
	if !errors.Is(err, store.ErrFenced) || !errors.As(err, &fe) || fe.Current != l.Epoch {
		t.Fatalf("append under epoch %d after lease %d: %v, want fenced", epoch, l.Epoch, err)
	}
	if h, err := b.Head(ctx, run); err != nil || h.Seq != 1 {
		t.Fatalf("head after the fenced append: %+v, %v; want seq 1", h, err)
	}
}

// TestAppendKnown_SealedElsewhere: a run sealed by another process (the
// seal leaves the head where it was) refuses the remembered-state append.
func TestAppendKnown_SealedElsewhere(t *testing.T) {
	ctx := context.Background()
	a, b, run, epoch := knownPair(t)
	if _, err := a.Append(ctx, epoch, []store.Append{conclude(run, "succeeded")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Seal(ctx, run, epoch, "succeeded"); err != nil {
		t.Fatal(err)
	}
	_, err := a.Append(ctx, epoch, []store.Append{note(run, "after the seal")})
	if !errors.Is(err, store.ErrRunSealed) {
		t.Fatalf("append to a run sealed elsewhere: %v, want ErrRunSealed", err)
	}
	if h, err := b.Head(ctx, run); err != nil || h.Seq != 2 {
		t.Fatalf("head after the refused append: %+v, %v; want seq 2", h, err)
	}
}

// TestAppendKnown_DuplicateEffect: exactly-once holds on the quick way: a
// second start of one effect is refused with the key named, in a group with
// other runs' appends that still land.
func TestAppendKnown_DuplicateEffect(t *testing.T) {
	ctx := context.Background()
	a, _, run, epoch := knownPair(t)
	other := store.NewRunID()
	lo, err := a.Acquire(ctx, other, "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, lo.Epoch, []store.Append{note(other, "first")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, epoch, []store.Append{effect(run, "charge")}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() {
		_, err := a.Append(ctx, epoch, []store.Append{effect(run, "charge")})
		errs <- err
	}()
	go func() {
		_, err := a.Append(ctx, lo.Epoch, []store.Append{note(other, "bystander")})
		errs <- err
	}()
	var dup, ok int
	for range 2 {
		err := <-errs
		var de *store.DuplicateEffectError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &de) && de.Run == run:
			dup++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	if dup != 1 || ok != 1 {
		t.Fatalf("%d refused, %d written; want 1 and 1", dup, ok)
	}
	if h, err := a.Head(ctx, other); err != nil || h.Seq != 2 {
		t.Fatalf("bystander's head %+v, %v; want 2", h, err)
	}
}

// TestAppendKnown_GroupWithNewAndMovedRuns: one group holds an append to a
// remembered run, one to a run never written and one to a remembered run
// another process moved. Each lands on its real head: the remembered one
// beside the ordinary writes in one transaction, the moved one again the
// ordinary way.
func TestAppendKnown_GroupWithNewAndMovedRuns(t *testing.T) {
	ctx := context.Background()
	a := openStore(t, Options{Committers: 1})
	b := openStore(t, Options{Tenant: a.Tenant()})
	epochs := map[store.RunID]store.Epoch{}
	start := func(first bool) store.RunID {
		run := store.NewRunID()
		l, err := a.Acquire(ctx, run, "a", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		epochs[run] = l.Epoch
		if first {
			if _, err := a.Append(ctx, l.Epoch, []store.Append{note(run, "first")}); err != nil {
				t.Fatal(err)
			}
		}
		return run
	}
	blocker, known, moved, fresh := start(true), start(true), start(true), start(false)
	if _, err := b.Append(ctx, epochs[moved], []store.Append{note(moved, "elsewhere")}); err != nil {
		t.Fatal(err)
	}
	// Stall the one committer on blocker's lock while the three queue.
	tx, err := testPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM runseal_test.leases WHERE tenant = $1 AND run = $2 FOR UPDATE`, a.Tenant(), blocker.String()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		run  store.RunID
		recs []store.Record
		err  error
	}
	results := make(chan result, 4)
	appendTo := func(run store.RunID) {
		recs, err := a.Append(ctx, epochs[run], []store.Append{note(run, "grouped")})
		results <- result{run, recs, err}
	}
	var holder int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	go appendTo(blocker)
	// The committer has taken blocker's append, alone, once it waits for the lock.
	waitFor(t, func() bool {
		var n int
		err := testPool(t).QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, holder).Scan(&n)
		return err == nil && n > 0
	})
	for _, run := range []store.RunID{known, moved, fresh} {
		go appendTo(run)
	}
	waitFor(t, func() bool { return a.appends.Waiting() == 3 })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[store.RunID]store.Seq{blocker: 2, known: 2, moved: 3, fresh: 1}
	for range 4 {
		r := <-results
		if r.err != nil {
			t.Fatalf("append to %s: %v", r.run, r.err)
		}
		if r.recs[0].Seq != want[r.run] {
			t.Errorf("append to %s got seq %d, want %d", r.run, r.recs[0].Seq, want[r.run])
		}
		if _, err := a.Verify(ctx, r.run); err != nil {
			t.Errorf("chain of %s: %v", r.run, err)
		}
	}
	for run, seq := range want {
		if k, ok := a.known.get(run); !ok || k.head.Seq != seq {
			t.Errorf("remembered %+v, %v for %s; want head %d", k, ok, run, seq)
		}
	}
}

// waitFor polls cond until it holds (the test's deadline bounds it).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		time.Sleep(time.Millisecond)
	}
}
