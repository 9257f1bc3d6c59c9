package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// The unsealed-by-edit checks attack a sealed run by setting its seal
// columns back to NULL, as an edit of the journal can, while the log still
// holds its leaf (spec/records.md, "What each check catches"). The run's
// own Verify must refuse it, and so must every write to it: an append, an
// atomic append, a bulk append, a second seal and a bulk seal, each
// refused as corruption with nothing stored changed.

// unsealByEdit removes the seal of the run at log index 2 of f from its
// row, and returns that run.
func (t *T) unsealByEdit(f sealedLog) store.RunID {
	run := f.sealed[2]
	if _, err := f.j.Verify(t.ctx, run); err != nil {
		t.Fatalf("Verify(%s) before the edit: %v", run, err)
	}
	t.tamper(f.j, `UPDATE runs SET sealed_outcome = NULL, sealed_at = NULL, log_index = NULL, leaf = NULL WHERE tenant = ? AND run = ?`,
		f.j.Tenant(), run.String())
	return run
}

// wantLoggedUnsealed requires err to be the corruption of a run the log
// holds while its row says it is open: a *store.CorruptError naming run,
// in the class store.ErrCorrupt and not store.ErrRunSealed.
func (t *T) wantLoggedUnsealed(err error, run store.RunID, what string) {
	ce := expect[*store.CorruptError](t, err, what)
	if !errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrRunSealed) || ce.Run != run {
		t.Fatalf("%s: %v; want the corruption of run %s, in class ErrCorrupt only", what, err, run)
	}
}

func checkUnsealedByEditVerifyRun(t *T) {
	f := t.sealedLog()
	run := t.unsealByEdit(f)
	_, err := f.j.Verify(t.ctx, run)
	t.wantLoggedUnsealed(err, run, "Verify of a run whose seal was edited away")
	v, err := store.VerifyRun(t.ctx, f.j, run)
	if err != nil || v.OK {
		t.Fatalf("VerifyRun of a run whose seal was edited away = %+v, %v; want a failed verdict", v, err)
	}
	if _, err := f.j.Verify(t.ctx, f.open); err != nil {
		t.Errorf("Verify(%s) of the untouched open run: %v", f.open, err)
	}
}

func checkUnsealedByEditAppendRefused(t *T) {
	f := t.sealedLog()
	t.wantAppendsRefused(f, t.unsealByEdit(f), 1)
	// A run written under a lease, which a backend may remember with its
	// head and epoch and append to without reading its row.
	run := store.NewRunID()
	l := t.acquire(f.j, run, "owner", time.Hour)
	t.append(f.j, l.Epoch, note(run, "leased"))
	t.concludeAndSeal(f.j, run, l.Epoch, "succeeded")
	t.tamper(f.j, `UPDATE runs SET sealed_outcome = NULL, sealed_at = NULL, log_index = NULL, leaf = NULL WHERE tenant = ? AND run = ?`,
		f.j.Tenant(), run.String())
	t.wantAppendsRefused(f, run, l.Epoch)
}

// wantAppendsRefused requires every append to run, whose seal was edited
// away, to be refused as corruption, while an append to another run goes
// in, and nothing of run or the log to change.
func (t *T) wantAppendsRefused(f sealedLog, run store.RunID, epoch store.Epoch) {
	head := t.head(f.j, run)
	before, err := f.j.Read(t.ctx, run, 1)
	if err != nil {
		t.Fatalf("Read(%s): %v", run, err)
	}
	cp := t.checkpoint(f.j)
	// Twice: a backend that remembers the runs it wrote may decide the
	// first from that memory and the second from the stored row.
	for range 2 {
		_, err := f.j.Append(t.ctx, epoch, []store.Append{note(run, "after the edit")})
		t.wantLoggedUnsealed(err, run, "Append to a run whose seal was edited away")
	}
	if a := f.j.Atomic(); a != nil {
		_, err := a.AppendAtomic(t.ctx, run, epoch, func(context.Context, store.AtomicTx) ([]store.Append, error) {
			return []store.Append{note(run, "atomically, after the edit")}, nil
		})
		t.wantLoggedUnsealed(err, run, "AppendAtomic to a run whose seal was edited away")
	}
	if bw, ok := f.j.(store.BulkWriter); ok {
		_, err := bw.AppendBulk(t.ctx, []store.BulkAppend{{Epoch: epoch, Batch: []store.Append{note(run, "in bulk, after the edit")}}})
		t.wantLoggedUnsealed(err, run, "AppendBulk to a run whose seal was edited away")
	}
	// The refusal is the run's alone: an append to another run goes in.
	t.append(f.j, 1, note(f.open, "beside the refused appends"))
	if h := t.head(f.j, run); h != head {
		t.Fatalf("after refused appends the head of %s is %+v, was %+v", run, h, head)
	}
	after, err := f.j.Read(t.ctx, run, 1)
	if err != nil || len(after) != len(before) {
		t.Fatalf("after refused appends Read(%s) = %d records, %v; was %d", run, len(after), err, len(before))
	}
	if got := t.checkpoint(f.j); got != cp {
		t.Fatalf("after refused appends the checkpoint is %+v, was %+v", got, cp)
	}
	// The edit is still there to be found.
	_, err = f.j.Verify(t.ctx, run)
	t.wantLoggedUnsealed(err, run, "Verify after refused appends")
}

func checkUnsealedByEditResealRefused(t *T) {
	f := t.sealedLog()
	run := t.unsealByEdit(f)
	cp := t.checkpoint(f.j)
	_, err := f.j.Seal(t.ctx, run, 1, "cancelled") // the run's outcome (index 2 of sealRuns)
	t.wantLoggedUnsealed(err, run, "Seal of a run whose seal was edited away")
	if bw, ok := f.j.(store.BulkWriter); ok {
		_, err := bw.SealBulk(t.ctx, []store.BulkSeal{{Run: run, Epoch: 1, Outcome: "cancelled"}})
		t.wantLoggedUnsealed(err, run, "SealBulk of a run whose seal was edited away")
	}
	if got := t.checkpoint(f.j); got != cp {
		t.Fatalf("after a refused re-seal the checkpoint is %+v, was %+v: the log holds a run twice", got, cp)
	}
	_, err = f.j.Verify(t.ctx, run)
	t.wantLoggedUnsealed(err, run, "Verify after a refused re-seal")
}

// checkEarlierRecordInLog: a run unsealed by an edit and then appended to
// (by a store that did not check, or by editing its records) has its leaf
// at a record before its head. The per-run check looks up every record,
// so it notices; here the log is given a leaf of the open run's first
// record.
func checkEarlierRecordInLog(t *T) {
	f := t.sealedLog()
	recs, err := f.j.Read(t.ctx, f.open, 1)
	if err != nil || len(recs) < 2 {
		t.Fatalf("Read(%s) = %d records, %v; want 2", f.open, len(recs), err)
	}
	leaf := log.LeafHash(log.Hash(recs[0].Hash))
	t.tamper(f.j, `INSERT INTO log_nodes(tenant, level, idx, hash) VALUES(?, 0, 5, ?)`, f.j.Tenant(), leaf[:])
	t.tamper(f.j, `UPDATE logs SET size = 6 WHERE tenant = ?`, f.j.Tenant())
	_, err = f.j.Verify(t.ctx, f.open)
	t.wantLoggedUnsealed(err, f.open, "Verify of an open run whose first record is a leaf of the log")
	if ce := expect[*store.CorruptError](t, err, "Verify"); ce.Seq != 1 {
		t.Fatalf("Verify names seq %d, want 1, the record the log holds: %v", ce.Seq, err)
	}
}
