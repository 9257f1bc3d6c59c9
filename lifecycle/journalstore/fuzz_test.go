package journalstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
)

// fuzzKinds are the record kinds a foreign record of FuzzForeignRecord
// takes: every kind the lifecycle writes, and one it does not.
var fuzzKinds = []string{
	journalstore.RecordTrialReserved, journalstore.RecordTrialCreated, journalstore.RecordTrialClaimed,
	journalstore.RecordTrialHeartbeat, journalstore.RecordTrialMutated, journalstore.RecordTrialTerminal,
	journalstore.RecordFinalizationAcquired, journalstore.RecordFinalizationRenewed, journalstore.RecordFinalizationReleased,
	journalstore.RecordOutboxAdvanced, journalstore.RecordEffectCompleted, journalstore.RecordReplacementCreated,
	journalstore.RecordFinalizedStatePut, journalstore.RecordTrialRecordsVoided, store.KindRunConcluded, "Unrelated",
}

// FuzzForeignRecord appends one record the lifecycle did not write (any
// kind, any fields) to a study's run or to its running trial's run, at the
// epoch the journal's fence lets through, as a second writer or a hand
// edit would. The lifecycle's parser of journal records (the fold) must
// never panic: a reader either shows the study (the record happens to be
// a transition the contract allows) or refuses it with ErrInconsistent,
// never another error; and Repair mends every trial run so damaged, and
// refuses (Conflict) damage to the study run.
func FuzzForeignRecord(f *testing.F) {
	f.Add(uint8(3), false, []byte(`{"heartbeat_seq":1}`))
	f.Add(uint8(3), false, []byte(`{"heartbeat_seq":7}`))
	f.Add(uint8(2), false, []byte(`{"owner":"B"}`))
	f.Add(uint8(7), true, []byte(`{"fence":2,"heartbeat_seq":1}`))
	f.Add(uint8(6), true, []byte(`{"holder":"x","fence":1}`))
	f.Add(uint8(13), true, []byte(`{"trial":"01J9Z8Q4W5X6Y7Z8A9B0C1D2E3","from_seq":3,"to_seq":9,"reason":"r"}`))
	f.Add(uint8(15), false, []byte(`{}`))
	dir := f.TempDir() // a subtest's name holds '#', which a journal path may not
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, kind uint8, studyRun bool, fields []byte) {
		ctx := context.Background()
		st := openJournal(t, filepath.Join(dir, fmt.Sprintf("journal-%d.db", n.Add(1))))
		defer st.Close()
		e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
		defer e.s.Close()
		var err error
		e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
		e.must(err, "create study")
		tok := e.claim(e.reserve(""), "owner")
		c, err := store.ParseCaseID(string(e.study))
		e.must(err, "case")
		run, epoch := store.RunID(c), store.Epoch(0)
		if studyRun {
			recs, err := st.ReadPage(ctx, run, 1, 1)
			e.must(err, "read the study run")
			epoch = recs[0].Epoch
		} else {
			run, err = store.ParseRunID(string(tok.Trial))
			e.must(err, "run")
			epoch = store.Epoch(tok.Epoch)
		}
		if _, err := st.Append(ctx, epoch, []store.Append{{Run: run, Case: c, Kind: fuzzKinds[int(kind)%len(fuzzKinds)], Fields: fields}}); err != nil {
			t.Skip("the journal refuses the record itself:", err)
		}
		_, err = journalstore.ReadStudyView(ctx, st, e.study)
		if err == nil {
			return
		}
		var ie *journalstore.InconsistentError
		if !errors.As(err, &ie) || lifecycle.KindOf(err) != lifecycle.KindStorage {
			t.Fatalf("a foreign record surfaced as %v", err)
		}
		_, err = e.s.Repair(ctx, e.study, "fuzz")
		switch {
		case ie.Run == run && run != store.RunID(c):
			if err != nil {
				t.Fatalf("repair of a damaged trial run: %v", err)
			}
			if _, err := journalstore.ReadStudyView(ctx, st, e.study); err != nil {
				t.Fatalf("the study after its repair: %v", err)
			}
		case lifecycle.KindOf(err) != lifecycle.KindConflict:
			t.Fatalf("repair of damage at run %s seq %d: %v", ie.Run, ie.Seq, err)
		}
	})
}
