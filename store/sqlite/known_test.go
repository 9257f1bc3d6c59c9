package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// twoWriters opens the same file twice: two writers with memories of their
// own, as two processes sharing a journal have.
func twoWriters(t *testing.T) (a, b *Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	return open(t, path, Options{}), open(t, path, Options{})
}

// appendOne appends one note through s and returns its record.
func appendOne(t *testing.T, s *Store, epoch store.Epoch, run store.RunID, text string) store.Record {
	t.Helper()
	recs, err := s.Append(context.Background(), epoch, []store.Append{note(run, text)})
	if err != nil {
		t.Fatalf("append %q: %v", text, err)
	}
	return recs[0]
}

// wantChain requires run's records to be seqs 1..n, each chained to the
// one before, and the run to verify.
func wantChain(t *testing.T, s *Store, run store.RunID, n int) {
	t.Helper()
	ctx := context.Background()
	recs, err := s.Read(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("run holds %d records, want %d", len(recs), n)
	}
	prev := store.Digest{}
	for i, r := range recs {
		if r.Seq != store.Seq(i+1) || r.PrevHash != prev {
			t.Fatalf("record %d: seq %d, prev %x; want seq %d after %x (a fork)", i, r.Seq, r.PrevHash[:4], i+1, prev[:4])
		}
		prev = r.Hash
	}
	if _, err := s.Verify(ctx, run); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// TestKnownRuns_HeadMovedByAnotherWriterIsNotTrusted: a writer's memory of
// a run's head is checked by the statement that moves it. When another
// process appended in between, the append is placed after that process's
// record, never on the remembered head (which would fork the chain at a
// seq stored twice).
func TestKnownRuns_HeadMovedByAnotherWriterIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	a, b := twoWriters(t)
	run := store.NewRunID()
	l, err := a.Acquire(ctx, run, "w", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	appendOne(t, a, l.Epoch, run, "a1") // a remembers seq 1
	appendOne(t, b, l.Epoch, run, "b2") // another process moves the head to 2
	if r := appendOne(t, a, l.Epoch, run, "a3"); r.Seq != 3 {
		t.Fatalf("append after another writer's got seq %d, want 3", r.Seq)
	}
	appendOne(t, a, l.Epoch, run, "a4") // remembered again, now rightly
	wantChain(t, a, run, 4)
}

// takenOver leaves a writer a that remembers run under the lease of
// old.Epoch, after another process released it and took it under cur.
func takenOver(t *testing.T) (a *Store, run store.RunID, old, cur store.Lease) {
	t.Helper()
	ctx := context.Background()
	a, b := twoWriters(t)
	run = store.NewRunID()
	old, err := a.Acquire(ctx, run, "w1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	appendOne(t, a, old.Epoch, run, "a1") // a remembers the lease of old.Epoch
	if err := b.ReleaseLease(ctx, run, old.Epoch); err != nil {
		t.Fatal(err)
	}
	cur, err = b.Acquire(ctx, run, "w2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Epoch == old.Epoch {
		t.Fatalf("the new lease kept epoch %d", cur.Epoch)
	}
	return a, run, old, cur
}

// TestKnownRuns_LeaseTakenOverElsewhereIsFenced: a writer that remembers a
// run under one lease still fences an append of that lease once another
// process holds the run under a new one, and takes the new holder's
// append, which its memory alone would have refused.
func TestKnownRuns_LeaseTakenOverElsewhereIsFenced(t *testing.T) {
	ctx := context.Background()
	a, run, old, cur := takenOver(t)
	_, err := a.Append(ctx, old.Epoch, []store.Append{note(run, "stale")})
	var fenced *store.FencedError
	if !errors.As(err, &fenced) || fenced.Current != cur.Epoch {
		t.Fatalf("append under the old lease: %v, want FencedError naming epoch %d", err, cur.Epoch)
	}
	if r := appendOne(t, a, cur.Epoch, run, "a2"); r.Seq != 2 {
		t.Fatalf("append under the new lease got seq %d, want 2", r.Seq)
	}
	wantChain(t, a, run, 2)
}

// TestKnownRuns_SealedElsewhereIsRefused: a run another process sealed
// after this writer last appended to it (the seal moves no head) takes no
// further record through this writer.
func TestKnownRuns_SealedElsewhereIsRefused(t *testing.T) {
	ctx := context.Background()
	a, b := twoWriters(t)
	run := store.NewRunID()
	l, err := a.Acquire(ctx, run, "w", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, l.Epoch, []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatal(err)
	}
	appendOne(t, a, l.Epoch, run, "after the conclusion") // remembered, unsealed
	if _, err := b.Seal(ctx, run, l.Epoch, "succeeded"); err != nil {
		t.Fatal(err)
	}
	_, err = a.Append(ctx, l.Epoch, []store.Append{note(run, "late")})
	if !errors.Is(err, store.ErrRunSealed) {
		t.Fatalf("append to a run sealed by another process: %v, want ErrRunSealed", err)
	}
	wantChain(t, a, run, 2)
}

// TestKnownRuns_RememberedAheadOfTheFileIsNotTrusted: a group that fails
// after the writer updated its memory (a commit that fails, another
// tenant's batch that fails the group) leaves the memory ahead of the
// file; the next append finds the stored head, not the remembered one.
func TestKnownRuns_RememberedAheadOfTheFileIsNotTrusted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	run := store.NewRunID()
	appendOne(t, s, 1, run, "a1")
	// The memory says seq 2 was written; the file holds seq 1 only.
	k := knownKey(s.tenant, run.String())
	m := s.known[k]
	m.head = store.Head{Seq: 2, Hash: store.Sum([]byte("never written"))}
	s.known[k] = m
	if r := appendOne(t, s, 1, run, "a2"); r.Seq != 2 {
		t.Fatalf("append after a memory ahead of the file got seq %d, want 2", r.Seq)
	}
	wantChain(t, s, run, 2)
}

// TestKnownRuns_NewHolderIsNotRefusedByMemory: the first append of a run's
// new lease holder, through a writer that remembers the old lease, is
// taken: the memory alone would fence it (its epoch is not the remembered
// one), so the refusal is decided again on the stored lease.
func TestKnownRuns_NewHolderIsNotRefusedByMemory(t *testing.T) {
	a, run, _, cur := takenOver(t)
	if r := appendOne(t, a, cur.Epoch, run, "a2"); r.Seq != 2 {
		t.Fatalf("the new holder's append got seq %d, want 2", r.Seq)
	}
	wantChain(t, a, run, 2)
}
