package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// TestStudyShow runs a study with JournalStorage on a journal file, closes
// it as a service would at exit, and shows it with the CLI.
func TestStudyShow(t *testing.T) {
	db := newJournal(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := journalstore.New(st)
	if err != nil {
		t.Fatal(err)
	}
	study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	if err != nil {
		t.Fatal(err)
	}
	reserve := func() lifecycle.TrialID {
		out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 10})
		if err != nil {
			t.Fatal(err)
		}
		return out.Trial
	}
	done, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: reserve(), Owner: "worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := s.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: done, State: lifecycle.TrialComplete, Values: []float64{0.25}}, lifecycle.FinalizationIntent{Kind: "tell"})
	if err != nil {
		t.Fatal(err)
	}
	running, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: reserve(), Owner: "worker-2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx, lifecycle.RenewRequest{Owner: running}); err != nil {
		t.Fatal(err)
	}
	obs, err := s.ObserveFinalization(ctx, study)
	if err != nil {
		t.Fatal(err)
	}
	fin, err := s.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: study, Holder: "finalizer-1", Observed: obs})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []lifecycle.OutboxAdvanceRequest{
		{Key: key, Phase: lifecycle.PhaseCallbacks},
		{Key: key, Phase: lifecycle.PhaseEffects, Effects: []lifecycle.OutboxEffect{{Name: "notify", Kind: lifecycle.EffectExternal}, {Name: "archive", Kind: lifecycle.EffectExternal}}},
	} {
		if _, err := s.AdvanceOutboxOwned(ctx, fin, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CompleteOutboxEffect(ctx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "archive"}}); err != nil {
		t.Fatal(err)
	}
	reserve()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	out := mustCLI(t, db, "", "study", "show", string(study))
	for _, want := range []string{
		"study " + string(study), "3 trial(s)", `finalization: held by "finalizer-1" at fence 1`,
		string(done.Trial), "complete", "worker-2", "running", "waiting",
		"effects", "notify", "tell",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("study show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "archive") {
		t.Errorf("a completed effect is shown as pending:\n%s", out)
	}
	t.Logf("journal study show:\n%s", out)

	var v journalstore.StudyView
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "study", "show", "case_"+string(study), "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Study != study || len(v.Trials) != 3 || v.Trials[0].State != lifecycle.TrialComplete || !v.Trials[0].Sealed ||
		v.Trials[1].Owner != "worker-2" || v.Trials[1].Epoch != running.Epoch || v.Trials[1].HeartbeatSeq != 1 ||
		v.Finalization.Holder != "finalizer-1" || len(v.Outbox) != 1 || v.Outbox[0].Phase != lifecycle.PhaseEffects ||
		len(v.Outbox[0].PendingEffects) != 1 || v.Outbox[0].PendingEffects[0] != "notify" || len(v.Pending) != 0 {
		t.Errorf("study show --json: %+v", v)
	}

	expect(t, cli(t, db, "", "study"), exitUsage, "study needs a subcommand: list, show or repair")

	// The listing: one study, its three trials by state, the finalizer,
	// one open outbox record.
	list := mustCLI(t, db, "", "study", "list")
	if !strings.Contains(list, string(study)) || !strings.Contains(list, "finalizer-1") {
		t.Errorf("study list:\n%s", list)
	}
	var sums []journalstore.StudySummary
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "study", "list", "--json")), &sums); err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].Study != study || sums[0].Trials != 3 || sums[0].States[lifecycle.TrialComplete] != 1 ||
		sums[0].States[lifecycle.TrialRunning] != 1 || sums[0].States[lifecycle.TrialWaiting] != 1 ||
		sums[0].Finalizer != "finalizer-1" || sums[0].OutboxOpen != 1 || sums[0].Pending != 0 || sums[0].Inconsistent != nil {
		t.Errorf("study list --json: %+v", sums)
	}
	expect(t, cli(t, db, "", "study", "list", "--limit", "0"), exitUsage, "--limit 0 is outside")
	expect(t, cli(t, db, "", "study", "show"), exitUsage, "accepts 1 arg")
	expect(t, cli(t, db, "", "study", "show", "nope"), exitUsage, `STUDY "nope" is not a study id`)
	expect(t, cli(t, db, "", "study", "show", store.NewCaseID().String()), exitFailure, "no study")
	// A run that is not a study's is not shown as one.
	expect(t, cli(t, db, "", "study", "show", string(done.Trial)), exitFailure, "no study")
}

// TestStudyShow_InconsistentStudy: a study whose trial run got a record
// behind JournalStorage's back is refused with exit 1, and the message
// names the record that does not fold.
func TestStudyShow_InconsistentStudy(t *testing.T) {
	db := newJournal(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := journalstore.New(st)
	if err != nil {
		t.Fatal(err)
	}
	study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 10})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "w"})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := store.ParseCaseID(string(study))
	run, _ := store.ParseRunID(string(tok.Trial))
	recs, err := st.Append(ctx, store.Epoch(tok.Epoch), []store.Append{{Run: run, Case: c, Kind: journalstore.RecordTrialHeartbeat, Fields: []byte(`{"heartbeat_seq":9}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(s.Close(), st.Close()); err != nil {
		t.Fatal(err)
	}
	expect(t, cli(t, db, "", "study", "show", string(study)), exitFailure,
		fmt.Sprintf("do not fold at run %s seq %d", run, recs[0].Seq))
	// The listing goes on, and says which study and where.
	if out := mustCLI(t, db, "", "study", "list"); !strings.Contains(out, fmt.Sprintf("%s  inconsistent: run %s seq %d", study, run, recs[0].Seq)) {
		t.Errorf("study list over an inconsistent study:\n%s", out)
	}

	// The repair voids the record, and the study shows again.
	expect(t, cli(t, db, "", "study", "repair", string(study)), exitUsage, "--reason")
	repaired := mustCLI(t, db, "", "study", "repair", string(study), "--reason", "appended by hand in a test")
	if !strings.Contains(repaired, fmt.Sprintf("voided records %d to %d of trial %s", recs[0].Seq, recs[0].Seq, tok.Trial)) || !strings.Contains(repaired, "TrialHeartbeat") {
		t.Errorf("study repair:\n%s", repaired)
	}
	if out := mustCLI(t, db, "", "study", "show", string(study)); !strings.Contains(out, fmt.Sprintf("records %d to %d of its run are voided", recs[0].Seq, recs[0].Seq)) || !strings.Contains(out, "running") {
		t.Errorf("study show after the repair:\n%s", out)
	}
	expect(t, cli(t, db, "", "study", "repair", string(study), "--reason", "again"), exitFailure, "nothing to repair")
}
