package journalstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/faulty"
)

// TestJournalStorage_RepairSecondWritersClaim is the damage of issue 11
// item 5 as an earlier version left it: a second writer, with a stale
// view, released the owner's journal lease as an orphan, took the next
// epoch and wrote its own TrialClaimed to a running trial. The study no
// longer folded. Repair voids that record (it stays in the journal, named
// in the view), the study folds again, the first owner is fenced out in
// the journal, and the ordinary stale sweep ends the trial: sealed, with
// every run verifying.
func TestJournalStorage_RepairSecondWritersClaim(t *testing.T) {
	ctx := context.Background()
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	tok := e.claim(e.reserve(""), "A")
	other := e.claim(e.reserve(""), "A2")

	foreign, l := secondWritersClaim(t, e, st, tok)
	if _, err := e.s.Renew(ctx, lifecycle.RenewRequest{Owner: tok}); err == nil {
		t.Fatal("the owner renewed through a foreign claim")
	}
	if _, err := e.s.InspectStudy(ctx, e.study); !errors.Is(err, journalstore.ErrInconsistent) {
		t.Fatalf("the damaged study: %v", err)
	}
	if _, err := e.s.Repair(ctx, e.study, ""); lifecycle.KindOf(err) != lifecycle.KindInvalid {
		t.Fatalf("a repair without a reason: %v", err)
	}

	rep, err := e.s.Repair(ctx, e.study, "second writer before the one-writer lock (issue 11 item 5)")
	e.must(err, "repair")
	if rep.Trial != tok.Trial || rep.From != foreign[0].Seq || rep.To != foreign[0].Seq || len(rep.Records) != 1 ||
		rep.Records[0].Kind != journalstore.RecordTrialClaimed || rep.Records[0].Epoch != l.Epoch || rep.Authority == 0 || len(rep.OwnerFailed) != 1 || rep.OwnerFailed[0] != tok.Trial {
		t.Fatalf("repaired: %+v", rep)
	}
	if _, err := e.s.Repair(ctx, e.study, "again"); lifecycle.KindOf(err) != lifecycle.KindConflict {
		t.Fatalf("a repair of a study that folds: %v", err)
	}
	// The voided record stays in the journal and is named; the owner it
	// fenced out is failed as a stale owner, with the repair's intent.
	v, err := e.s.StudyView(ctx, e.study)
	e.must(err, "view after the repair")
	if tv := v.Trials[0]; len(tv.Voided) != 1 || tv.Voided[0] != [2]store.Seq{rep.From, rep.To} || tv.State != lifecycle.TrialFailed || !tv.Sealed {
		t.Fatalf("the repaired trial: %+v", tv)
	}
	if len(v.Outbox) != 1 || v.Outbox[0].Intent != journalstore.RepairIntent || v.Outbox[0].Cause != lifecycle.CauseStale {
		t.Fatalf("the repaired trial's outbox record: %+v", v.Outbox)
	}
	if err := e.s.Terminal(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{2}}); lifecycle.KindOf(err) != lifecycle.KindLeaseLost {
		t.Fatalf("the fenced-out owner's terminal: %v", err)
	}
	// The other trial was never touched and carries on.
	e.must(e.s.Terminal(ctx, lifecycle.TerminalRequest{Owner: other, State: lifecycle.TrialComplete, Values: []float64{1}}), "the other trial ends")
	verifyStudy(t, ctx, e.s, st, e.study)
}

// TestJournalStorage_RepairRefusesTheStudyRun: a repair voids trial run
// records only; damage to the study run is refused and nothing written.
func TestJournalStorage_RepairRefusesTheStudyRun(t *testing.T) {
	ctx := context.Background()
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	defer e.s.Close()
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	e.reserve("")
	c, err := store.ParseCaseID(string(e.study))
	e.must(err, "case")
	h, err := st.Head(ctx, store.RunID(c))
	e.must(err, "head")
	recs, err := st.Read(ctx, store.RunID(c), 1)
	e.must(err, "read")
	if _, err := st.Append(ctx, recs[len(recs)-1].Epoch, []store.Append{{Run: store.RunID(c), Case: c, Kind: journalstore.RecordFinalizationRenewed, Fields: []byte(`{"fence":9,"heartbeat_seq":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Repair(ctx, e.study, "try"); lifecycle.KindOf(err) != lifecycle.KindConflict {
		t.Fatalf("a repair of the study run: %v", err)
	}
	after, err := st.Head(ctx, store.RunID(c))
	e.must(err, "head")
	if after.Seq != h.Seq+1 {
		t.Fatalf("the refused repair wrote: head %d, was %d before the foreign record", after.Seq, h.Seq)
	}
}

// secondWritersClaim does by hand what a second JournalStorage's Claim of
// the running trial tok did before the one-writer lock: release the
// owner's journal lease as an orphan, take the next epoch, write its own
// TrialClaimed.
func secondWritersClaim(t *testing.T, e *studyEnv, j store.Journal, tok lifecycle.TrialOwnerToken) ([]store.Record, store.Lease) {
	t.Helper()
	run, err := store.ParseRunID(string(tok.Trial))
	e.must(err, "run")
	c, err := store.ParseCaseID(string(e.study))
	e.must(err, "case")
	e.must(j.ReleaseLease(e.ctx, run, store.Epoch(tok.Epoch)), "the second writer releases the owner's lease")
	l, err := j.Acquire(e.ctx, run, "runseal.lifecycle", store.MaxTTL)
	e.must(err, "the second writer acquires")
	foreign, err := j.Append(e.ctx, l.Epoch, []store.Append{{Run: run, Case: c, Kind: journalstore.RecordTrialClaimed, Fields: []byte(`{"owner":"B"}`)}})
	e.must(err, "the second writer's claim")
	return foreign, l
}

// TestJournalStorage_RepairInterruptedCompletes: a repair whose void
// landed but whose failure of the fenced-out owner did not is completed by
// the next Repair, which voids nothing and fails the owner.
func TestJournalStorage_RepairInterruptedCompletes(t *testing.T) {
	ctx := context.Background()
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	fj := faulty.New(st, faulty.Options{})
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, fj)}
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	tok := e.claim(e.reserve(""), "A")
	secondWritersClaim(t, e, st, tok)

	arm(fj, 2, false) // the void lands; the failure's first write does not
	_, err = e.s.Repair(ctx, e.study, "interrupted")
	writes := disarm(fj)
	if lifecycle.KindOf(err) != lifecycle.KindStorage || len(writes) != 2 {
		t.Fatalf("the interrupted repair: %v after writes %q", err, writes)
	}
	rep, err := e.s.Repair(ctx, e.study, "completed")
	e.must(err, "the repair again")
	if rep.Authority != 0 || len(rep.Records) != 0 || len(rep.OwnerFailed) != 1 || rep.OwnerFailed[0] != tok.Trial {
		t.Fatalf("the second repair: %+v", rep)
	}
	if _, err := e.s.Repair(ctx, e.study, "a third time"); lifecycle.KindOf(err) != lifecycle.KindConflict {
		t.Fatalf("a third repair: %v", err)
	}
	verifyStudy(t, ctx, e.s, fj, e.study)
}
