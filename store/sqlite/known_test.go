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

// appendsInOneGroup appends one note to each run through s, all in one
// group: the writer is held while they queue, in order.
func appendsInOneGroup(t *testing.T, s *Store, epoch store.Epoch, runs []store.RunID) []store.Record {
	t.Helper()
	ctx := context.Background()
	release := holdWriter(t, s)
	recs := make([]store.Record, len(runs))
	errs := make([]chan error, len(runs))
	for i, run := range runs {
		errs[i] = make(chan error, 1)
		go func() {
			r, err := s.Append(ctx, epoch, []store.Append{note(run, "grouped")})
			if err == nil {
				recs[i] = r[0]
			}
			errs[i] <- err
		}()
		awaitQueued(s, i+1)
	}
	release()
	for i, ch := range errs {
		if err := <-ch; err != nil {
			t.Fatalf("append to run %d: %v", i, err)
		}
	}
	return recs
}

// TestKnownRuns_OneOfTwoMovedElsewhereForksNothing: in a group of two
// remembered runs, one moved by another process, the group is not written
// on the memory: every remembered run must move, not some. Only that count
// and the runs row guard a run's seqs (the records have no unique key on
// them), so a group counted loosely would store a second record at a seq.
func TestKnownRuns_OneOfTwoMovedElsewhereForksNothing(t *testing.T) {
	a, b := twoWriters(t)
	r1, r2 := store.NewRunID(), store.NewRunID()
	appendOne(t, a, 1, r1, "x1")
	appendOne(t, a, 1, r2, "y1")
	appendOne(t, b, 1, r2, "y2") // r2's head moves behind a's back
	recs := appendsInOneGroup(t, a, 1, []store.RunID{r1, r2})
	if recs[0].Seq != 2 || recs[1].Seq != 3 {
		t.Fatalf("the group's appends got seqs %d and %d, want 2 and 3", recs[0].Seq, recs[1].Seq)
	}
	wantChain(t, a, r1, 2)
	wantChain(t, a, r2, 3)
}

// TestKnownRuns_RememberedSeqWithAnotherHashIsNotTrusted: a memory that
// holds the file's seq but not its hash (a group rolled back after it was
// remembered, then another writer appended at that seq) is not trusted:
// the append links to the stored record, not the remembered one.
func TestKnownRuns_RememberedSeqWithAnotherHashIsNotTrusted(t *testing.T) {
	a, b := twoWriters(t)
	run := store.NewRunID()
	appendOne(t, a, 1, run, "a1")
	appendOne(t, b, 1, run, "b2")
	k := knownKey(a.tenant, run.String())
	m := a.known[k]
	m.head = store.Head{Seq: 2, Hash: store.Sum([]byte("rolled back"))} // the file's seq, not its hash
	a.known[k] = m
	if r := appendOne(t, a, 1, run, "a3"); r.Seq != 3 {
		t.Fatalf("got seq %d, want 3", r.Seq)
	}
	wantChain(t, a, run, 3)
}

// TestKnownRuns_BulkIsNotRemembered: a bulk append (a restore of many runs)
// neither reads nor fills the memory, so the memory's bound holds whatever
// a bulk append's size.
func TestKnownRuns_BulkIsNotRemembered(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "j.db"), Options{})
	bulk := make([]store.BulkAppend, maxKnownRuns+10)
	for i := range bulk {
		bulk[i] = store.BulkAppend{Epoch: 1, Batch: []store.Append{note(store.NewRunID(), "restored")}}
	}
	if _, err := s.AppendBulk(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	if n := len(s.known); n != 0 {
		t.Fatalf("a bulk append of %d runs left %d in the memory, want 0", len(bulk), n)
	}
}
