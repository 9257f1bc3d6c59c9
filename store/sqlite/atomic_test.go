package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// TestAtomicCommitsTogether: derived rows written in AppendAtomic's work
// commit with its records; a failing member, or records the journal
// refuses, take the rows back with them; a row never moves back to an
// earlier position.
func TestAtomicCommitsTogether(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "j.db"), Options{})
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rows := func() map[int64]string {
		out := map[int64]string{}
		if err := s.ReadDerived(ctx, "scope", -1, 100, 100, func(pos, at int64, body []byte) error {
			out[pos] = string(body)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	recs, err := s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		if err := s.PutDerived(ctx, tx, "scope", 1, 1, []byte("one")); err != nil {
			return nil, err
		}
		h, err := tx.(interface {
			Head(context.Context, store.RunID) (store.Head, error)
		}).Head(ctx, run)
		if err != nil || h.Seq != 0 {
			return nil, errors.Join(err, errors.New("head inside the transaction"))
		}
		return []store.Append{note(run, "a")}, nil
	})
	if err != nil || len(recs) != 1 || recs[0].Seq != 1 {
		t.Fatalf("AppendAtomic = %v, %v", recs, err)
	}
	if got := rows(); got[1] != "one" {
		t.Fatalf("rows after a commit: %v", got)
	}

	// The member fails: neither its row nor a record lands.
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		if err := s.PutDerived(ctx, tx, "scope", 2, 2, []byte("two")); err != nil {
			return nil, err
		}
		return nil, errors.New("declined")
	})
	if err == nil || !strings.Contains(err.Error(), "declined") {
		t.Fatalf("failing member: %v", err)
	}
	// The journal refuses the records (another run's): the row goes too.
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		if err := s.PutDerived(ctx, tx, "scope", 2, 2, []byte("two")); err != nil {
			return nil, err
		}
		return []store.Append{note(store.NewRunID(), "elsewhere")}, nil
	})
	var ia *store.InvalidArgumentError
	if !errors.As(err, &ia) {
		t.Fatalf("atomic append of another run's record: %v", err)
	}
	if got := rows(); len(got) != 1 {
		t.Fatalf("a refused atomic append left rows: %v", got)
	}
	if h, _ := s.Head(ctx, run); h.Seq != 1 {
		t.Fatalf("a refused atomic append wrote records: head %d", h.Seq)
	}

	// A row does not move back.
	if err := s.WriteDerived(ctx, func(ctx context.Context, tx store.AtomicTx) error {
		return s.PutDerived(ctx, tx, "scope", 1, 0, []byte("older"))
	}); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got[1] != "one" {
		t.Fatalf("an older row replaced a newer one: %v", got)
	}
}

// TestAtomicFencedBeforeWork: work never runs for a fenced caller or on a
// sealed run.
func TestAtomicFencedBeforeWork(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "j.db"), Options{})
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	work := func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		ran = true
		return []store.Append{note(run, "x")}, nil
	}
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch+1, work)
	var f *store.FencedError
	if !errors.As(err, &f) || ran {
		t.Fatalf("fenced atomic append: err %v, work ran %v", err, ran)
	}
	if _, err := s.Append(ctx, l.Epoch, []store.Append{note(run, "a"), {Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, run, l.Epoch, "succeeded"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Atomic().AppendAtomic(ctx, run, l.Epoch, work)
	var rs *store.RunSealedError
	if !errors.As(err, &rs) || ran {
		t.Fatalf("atomic append to a sealed run: err %v, work ran %v", err, ran)
	}
}
