package journalstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/faulty"
)

// crashWrites are the journal writes a transition's write sequence
// counts: faults are scheduled on the n-th of them, whatever reads come
// between.
var crashWrites = []string{"Append", "AppendAtomic", "Seal", "Acquire", "ReleaseLease"}

// arm schedules the failure of the at-th write from now: landed, it
// commits and the acknowledgement is lost (a CommitUnknownError); not
// landed, it fails inside its transaction, after an AppendAtomic's work
// ran, so that everything the work wrote (the study's derived rows) rolls
// back with the records (a plain write fails before reaching the store).
func arm(j *faulty.Journal, at int, landed bool) {
	f := faulty.FailInTx
	if landed {
		f = faulty.LoseAck
	}
	j.Schedule(faulty.Options{Seed: uint64(at), Only: crashWrites, Trace: true, At: map[uint64]faulty.Fault{uint64(at): f}})
}

// disarm stops the faults and returns the writes made since arm, named as
// the scenarios name them.
func disarm(j *faulty.Journal) []string {
	var names []string
	for _, op := range j.Ops() {
		switch op.Method {
		case "Append", "AppendAtomic":
			names = append(names, "append "+op.Detail)
		case "Seal":
			names = append(names, "seal")
		case "Acquire":
			names = append(names, "acquire")
		case "ReleaseLease":
			names = append(names, "release")
		}
	}
	j.Schedule(faulty.Options{})
	return names
}

// crashEnv is one scenario run: a study on a fresh journal.
type crashEnv struct {
	t     *testing.T
	ctx   context.Context
	j     *faulty.Journal
	s     *journalstore.Storage
	study lifecycle.StudyID
	// set up by the scenario for its op and check
	tok   lifecycle.TrialOwnerToken
	trial lifecycle.TrialID
	key   lifecycle.OutboxKey
	obs   lifecycle.LeaseObservation
	fin   lifecycle.FinalizationToken
	n     uint64 // trial records before the op
}

func (e *crashEnv) must(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func (e *crashEnv) running(owner string) lifecycle.TrialOwnerToken {
	e.t.Helper()
	out, err := e.s.ReserveAndCreateIfBudget(e.ctx, lifecycle.ReserveAndCreateRequest{Study: e.study, MaxTrials: 100})
	e.must(err, "reserve")
	tok, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: owner})
	e.must(err, "claim")
	return tok
}

func (e *crashEnv) observe(tr lifecycle.TrialID) lifecycle.LeaseObservation {
	e.t.Helper()
	obs, err := e.s.Observe(e.ctx, tr)
	e.must(err, "observe")
	return obs
}

func (e *crashEnv) view() journalstore.StudyView {
	e.t.Helper()
	v, err := e.s.StudyView(e.ctx, e.study)
	e.must(err, "study view")
	return v
}

// finish ends a running trial with an intent and drives its record to done:
// the study must still work after the recovery.
func (e *crashEnv) finish(tok lifecycle.TrialOwnerToken) {
	e.t.Helper()
	key, err := e.s.TerminalWithIntent(e.ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{1}}, lifecycle.FinalizationIntent{Kind: "tell"})
	e.must(err, "terminal with intent after recovery")
	e.advanceToDone(key)
}

func (e *crashEnv) advanceToDone(key lifecycle.OutboxKey) {
	e.t.Helper()
	fin, err := e.s.ObserveFinalization(e.ctx, e.study)
	e.must(err, "observe finalization")
	owned := fin.Fence > 0
	var tok lifecycle.FinalizationToken
	if owned {
		if !fin.Held {
			tok, err = e.s.AcquireFinalization(e.ctx, lifecycle.FinalizationAcquireRequest{Study: e.study, Holder: "recovery", Observed: fin})
			e.must(err, "acquire finalization")
		} else {
			tok = lifecycle.FinalizationToken{Study: e.study, Holder: fin.Holder, Fence: fin.Fence}
		}
	}
	rec, ok, err := e.s.GetOutbox(e.ctx, key)
	if err != nil || !ok {
		e.t.Fatalf("get outbox %v: %v, %v", key, ok, err)
	}
	for _, p := range []lifecycle.OutboxPhase{lifecycle.PhaseCallbacks, lifecycle.PhaseEffects, lifecycle.PhaseDone} {
		if p.Rank() <= rec.Phase.Rank() {
			continue
		}
		req := lifecycle.OutboxAdvanceRequest{Key: key, Phase: p}
		var got lifecycle.OutboxPhase
		if owned {
			got, err = e.s.AdvanceOutboxOwned(e.ctx, tok, req)
		} else {
			got, err = e.s.AdvanceOutbox(e.ctx, req)
		}
		e.must(err, "advance "+string(p))
		if got != p {
			e.t.Fatalf("advance to %s: cursor %s", p, got)
		}
	}
}

// crashScenario is one transition under test.
type crashScenario struct {
	name string
	// writes is the journal writes the transition makes, in order.
	writes []string
	// commit is the index (from 1) of the write that commits it.
	commit int
	setup  func(e *crashEnv)
	op     func(e *crashEnv) error
	// check verifies the state after recovery: happened says whether the
	// transition must be found complete (its commit point landed) or
	// absent; and the study must go on working.
	check func(e *crashEnv, happened bool)
}

var finalizationIntent = lifecycle.FinalizationIntent{Kind: "tell", Data: json.RawMessage(`{"n":1}`)}

var crashScenarios = []crashScenario{
	{
		name:   "reserve",
		writes: []string{"append TrialReserved", "append RunAdmitted"},
		commit: 1,
		setup:  func(e *crashEnv) { e.n = uint64(len(e.view().Trials)) },
		op: func(e *crashEnv) error {
			_, err := e.s.ReserveAndCreateIfBudget(e.ctx, lifecycle.ReserveAndCreateRequest{Study: e.study, MaxTrials: 100, Key: "k"})
			return err
		},
		check: func(e *crashEnv, happened bool) {
			v := e.view()
			want := e.n
			if happened {
				want++
			}
			if uint64(len(v.Trials)) != want {
				e.t.Fatalf("want %d trial records, got %d", want, len(v.Trials))
			}
			// A replay of the key returns the reservation if it happened,
			// and makes it now if not.
			out, err := e.s.ReserveAndCreateIfBudget(e.ctx, lifecycle.ReserveAndCreateRequest{Study: e.study, MaxTrials: 100, Key: "k"})
			e.must(err, "replay the reservation")
			if out.Number != e.n || (happened && out.Trial != v.Trials[e.n].Trial) {
				e.t.Fatalf("replayed reservation %+v; trials %+v", out, v.Trials)
			}
			tok, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "w"})
			e.must(err, "claim the reserved trial")
			e.finish(tok)
		},
	},
	{
		name:   "claim",
		writes: []string{"acquire", "append TrialClaimed"},
		commit: 2,
		setup: func(e *crashEnv) {
			out, err := e.s.ReserveAndCreateIfBudget(e.ctx, lifecycle.ReserveAndCreateRequest{Study: e.study, MaxTrials: 100})
			e.must(err, "reserve")
			e.trial = out.Trial
		},
		op: func(e *crashEnv) error {
			_, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: e.trial, Owner: "w"})
			return err
		},
		check: func(e *crashEnv, happened bool) {
			obs := e.observe(e.trial)
			if !happened {
				if obs.State != lifecycle.TrialWaiting {
					e.t.Fatalf("claim did not commit, trial is %+v", obs)
				}
				// The lease the failed claim may have left is taken over.
				tok, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: e.trial, Owner: "w2"})
				e.must(err, "claim again")
				e.finish(tok)
				return
			}
			if obs.State != lifecycle.TrialRunning || obs.Owner != "w" || obs.Epoch == 0 {
				e.t.Fatalf("claim committed, trial is %+v", obs)
			}
			tok := lifecycle.TrialOwnerToken{Trial: e.trial, Owner: "w", Epoch: obs.Epoch}
			_, err := e.s.Renew(e.ctx, lifecycle.RenewRequest{Owner: tok})
			e.must(err, "the owner renews")
			e.finish(tok)
		},
	},
	{
		name:   "pause",
		writes: []string{"append TrialMutated", "release"},
		commit: 1,
		setup:  func(e *crashEnv) { e.tok = e.running("w") },
		op: func(e *crashEnv) error {
			return e.s.FencedMutate(e.ctx, lifecycle.FencedMutationRequest{Owner: e.tok, Pause: true, Params: []lifecycle.Param{{Name: "x", Value: 1}}})
		},
		check: func(e *crashEnv, happened bool) {
			obs := e.observe(e.tok.Trial)
			if !happened {
				if obs.State != lifecycle.TrialRunning {
					e.t.Fatalf("pause did not commit, trial is %+v", obs)
				}
				e.finish(e.tok)
				return
			}
			if obs.State != lifecycle.TrialPaused || obs.Epoch != e.tok.Epoch {
				e.t.Fatalf("pause committed, trial is %+v", obs)
			}
			tok, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: e.tok.Trial, Owner: "w2", Params: []lifecycle.Param{{Name: "x", Value: 1}}})
			e.must(err, "claim the paused trial")
			if tok.Epoch <= e.tok.Epoch {
				e.t.Fatalf("claim after pause: epoch %d after %d", tok.Epoch, e.tok.Epoch)
			}
			e.finish(tok)
		},
	},
	{
		name:   "terminal-with-intent",
		writes: []string{"append TrialTerminal", "append TrialTerminal", "seal", "release"},
		commit: 1,
		setup:  func(e *crashEnv) { e.tok = e.running("w") },
		op: func(e *crashEnv) error {
			_, err := e.s.TerminalWithIntent(e.ctx, lifecycle.TerminalRequest{
				Owner: e.tok, State: lifecycle.TrialComplete, Values: []float64{0.5},
				States: []lifecycle.StateBlob{{Scope: lifecycle.ScopeStudy, Name: "sampler", Kind: "tpe", Version: 1, Data: []byte("s")}},
			}, finalizationIntent)
			return err
		},
		check: func(e *crashEnv, happened bool) {
			obs := e.observe(e.tok.Trial)
			key := lifecycle.OutboxKey{Trial: e.tok.Trial, Epoch: e.tok.Epoch}
			rec, ok, err := e.s.GetOutbox(e.ctx, key)
			e.must(err, "get outbox")
			st, err := e.s.InspectStudy(e.ctx, e.study)
			e.must(err, "inspect study")
			if !happened {
				if obs.State != lifecycle.TrialRunning || ok || len(st.States) != 0 {
					e.t.Fatalf("terminal did not commit: trial %+v, outbox %v, study state %v", obs, ok, st.States)
				}
				e.finish(e.tok)
				return
			}
			if obs.State != lifecycle.TrialComplete || !ok || rec.Phase != lifecycle.PhaseInitial || len(st.States) != 1 {
				e.t.Fatalf("terminal committed: trial %+v, outbox %+v (%v), study state %v", obs, rec, ok, st.States)
			}
			_, err = e.s.Renew(e.ctx, lifecycle.RenewRequest{Owner: e.tok})
			if lifecycle.KindOf(err) != lifecycle.KindLeaseLost {
				e.t.Fatalf("renew after the terminal: %v", err)
			}
			e.advanceToDone(key)
		},
	},
	{
		name:   "fail-stale",
		writes: []string{"append TrialTerminal", "release", "acquire", "append TrialTerminal", "seal", "release"},
		commit: 1,
		setup: func(e *crashEnv) {
			e.tok = e.running("w")
			_, err := e.s.Renew(e.ctx, lifecycle.RenewRequest{Owner: e.tok, HeartbeatAt: time.Date(2030, 1, 1, 0, 0, 0, 1, time.UTC)})
			e.must(err, "renew")
			e.obs = e.observe(e.tok.Trial)
		},
		op: func(e *crashEnv) error {
			won, err := e.s.FailStale(e.ctx, lifecycle.FailStaleRequest{Observed: e.obs, Grace: time.Minute, Intent: finalizationIntent})
			if err == nil && !won {
				return errors.New("fail_stale lost with the exact observation")
			}
			return err
		},
		check: func(e *crashEnv, happened bool) {
			obs := e.observe(e.tok.Trial)
			key := lifecycle.OutboxKey{Trial: e.tok.Trial, Epoch: e.tok.Epoch}
			rec, ok, err := e.s.GetOutbox(e.ctx, key)
			e.must(err, "get outbox")
			if !happened {
				if !obs.Equal(e.obs) || ok {
					e.t.Fatalf("stale failure did not commit: trial %+v, outbox %v", obs, ok)
				}
				// The owner is still the owner, in the journal too.
				_, err := e.s.Renew(e.ctx, lifecycle.RenewRequest{Owner: e.tok})
				e.must(err, "the owner renews")
				e.finish(e.tok)
				return
			}
			if obs.State != lifecycle.TrialFailed || obs.Epoch != e.tok.Epoch || !ok || rec.Cause != lifecycle.CauseStale || rec.Grace != time.Minute {
				e.t.Fatalf("stale failure committed: trial %+v, outbox %+v (%v)", obs, rec, ok)
			}
			_, err = e.s.Renew(e.ctx, lifecycle.RenewRequest{Owner: e.tok})
			if lifecycle.KindOf(err) != lifecycle.KindLeaseLost {
				e.t.Fatalf("the failed owner renews: %v", err)
			}
			won, err := e.s.FailStale(e.ctx, lifecycle.FailStaleRequest{Observed: e.obs, Grace: time.Minute, Intent: finalizationIntent})
			if err != nil || won {
				e.t.Fatalf("a second sweeper: %v, %v", won, err)
			}
			e.advanceToDone(key)
		},
	},
	{
		name:   "abandon",
		writes: []string{"append TrialTerminal", "acquire", "append TrialTerminal", "seal", "release"},
		commit: 1,
		setup: func(e *crashEnv) {
			out, err := e.s.ReserveAndCreateIfBudget(e.ctx, lifecycle.ReserveAndCreateRequest{Study: e.study, MaxTrials: 100})
			e.must(err, "reserve")
			e.trial = out.Trial
		},
		op: func(e *crashEnv) error {
			won, err := e.s.Abandon(e.ctx, lifecycle.AbandonRequest{Trial: e.trial})
			if err == nil && !won {
				return errors.New("abandon of a waiting trial lost")
			}
			return err
		},
		check: func(e *crashEnv, happened bool) {
			obs := e.observe(e.trial)
			if !happened {
				if obs.State != lifecycle.TrialWaiting {
					e.t.Fatalf("abandon did not commit, trial is %+v", obs)
				}
				tok, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: e.trial, Owner: "w"})
				e.must(err, "claim")
				e.finish(tok)
				return
			}
			if obs.State != lifecycle.TrialFailed || obs.Epoch != 0 {
				e.t.Fatalf("abandon committed, trial is %+v", obs)
			}
			_, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: e.trial, Owner: "w"})
			if lifecycle.KindOf(err) != lifecycle.KindLeaseLost {
				e.t.Fatalf("claim of an abandoned trial: %v", err)
			}
		},
	},
	{
		name:   "mutate-owned-study-state-and-pause",
		writes: []string{"append TrialMutated", "append TrialMutated", "release"},
		commit: 1,
		setup: func(e *crashEnv) {
			e.tok = e.running("w")
			obs, err := e.s.ObserveFinalization(e.ctx, e.study)
			e.must(err, "observe finalization")
			e.fin, err = e.s.AcquireFinalization(e.ctx, lifecycle.FinalizationAcquireRequest{Study: e.study, Holder: "f", Observed: obs})
			e.must(err, "acquire finalization")
		},
		op: func(e *crashEnv) error {
			return e.s.MutateOwned(e.ctx, e.fin, lifecycle.FencedMutationRequest{
				Owner: e.tok, Pause: true, Params: []lifecycle.Param{{Name: "x", Value: 2}},
				Attrs:  map[string]json.RawMessage{"a": json.RawMessage(`{"b": [1, 2]}`)},
				States: []lifecycle.StateBlob{{Scope: lifecycle.ScopeStudy, Name: "sampler", Kind: "tpe", Version: 1, Data: []byte("v")}},
			})
		},
		check: func(e *crashEnv, happened bool) {
			obs := e.observe(e.tok.Trial)
			tr, err := e.s.InspectTrial(e.ctx, e.tok.Trial)
			e.must(err, "inspect trial")
			st, err := e.s.InspectStudy(e.ctx, e.study)
			e.must(err, "inspect study")
			if !happened {
				if obs.State != lifecycle.TrialRunning || len(tr.Params) != 0 || len(st.States) != 0 {
					e.t.Fatalf("mutation did not commit: trial %+v, study state %v", tr, st.States)
				}
				e.finish(e.tok)
				return
			}
			if obs.State != lifecycle.TrialPaused || len(tr.Params) != 1 || string(tr.Attrs["a"]) != `{"b":[1,2]}` || len(st.States) != 1 {
				e.t.Fatalf("mutation committed: trial %+v, study state %v", tr, st.States)
			}
			tok, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: e.tok.Trial, Owner: "w2"})
			e.must(err, "claim the paused trial")
			e.finish(tok)
		},
	},
	{
		name:   "create-replacement",
		writes: []string{"append ReplacementCreated", "append RunAdmitted"},
		commit: 1,
		setup: func(e *crashEnv) {
			tok := e.running("w")
			key, err := e.s.TerminalWithIntent(e.ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialFailed}, finalizationIntent)
			e.must(err, "terminal")
			e.key = key
			for _, p := range []lifecycle.OutboxPhase{lifecycle.PhaseCallbacks, lifecycle.PhaseEffects} {
				req := lifecycle.OutboxAdvanceRequest{Key: key, Phase: p}
				if p == lifecycle.PhaseEffects {
					req.Effects = []lifecycle.OutboxEffect{{Name: "retry", Kind: lifecycle.EffectReplacement, Replacement: &lifecycle.ReplacementSpec{
						MaxTrials: 100, Params: []lifecycle.Param{{Name: "x", Value: 3}},
						States: []lifecycle.StateBlob{{Scope: lifecycle.ScopeTrial, Name: "r", Kind: "k", Version: 1, Data: []byte("d")}},
					}}}
				}
				_, err := e.s.AdvanceOutbox(e.ctx, req)
				e.must(err, "advance")
			}
			e.n = uint64(len(e.view().Trials))
		},
		op: func(e *crashEnv) error {
			_, err := e.s.CreateReplacement(e.ctx, lifecycle.OutboxEffectKey{Outbox: e.key, Name: "retry"})
			return err
		},
		check: func(e *crashEnv, happened bool) {
			rec, _, err := e.s.GetOutbox(e.ctx, e.key)
			e.must(err, "get outbox")
			if n := uint64(len(e.view().Trials)); (n == e.n+1) != happened || len(rec.Completed) != int(n-e.n) {
				e.t.Fatalf("replacement (happened %t): %d trial records after %d, completions %+v", happened, n, e.n, rec.Completed)
			}
			out, err := e.s.CreateReplacement(e.ctx, lifecycle.OutboxEffectKey{Outbox: e.key, Name: "retry"})
			e.must(err, "replay the replacement")
			if happened && *rec.Completed[0].Replacement != out {
				e.t.Fatalf("replay returned %+v, recorded %+v", out, rec.Completed[0])
			}
			tr, err := e.s.InspectTrial(e.ctx, out.Trial)
			e.must(err, "inspect the replacement")
			if len(tr.Params) != 1 || len(tr.States) != 1 || tr.ReplacementOf == nil {
				e.t.Fatalf("replacement trial %+v", tr)
			}
			tok, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "w", Params: []lifecycle.Param{{Name: "x", Value: 3}}})
			e.must(err, "claim the replacement")
			e.finish(tok)
			e.advanceToDone(e.key)
		},
	},
	{
		name:   "acquire-finalization",
		writes: []string{"append FinalizationAcquired"},
		commit: 1,
		setup:  func(e *crashEnv) {},
		op: func(e *crashEnv) error {
			_, err := e.s.AcquireFinalization(e.ctx, lifecycle.FinalizationAcquireRequest{Study: e.study, Holder: "f", Observed: lifecycle.FinalizationObservation{Study: e.study}})
			return err
		},
		check: func(e *crashEnv, happened bool) {
			fin, err := e.s.ObserveFinalization(e.ctx, e.study)
			e.must(err, "observe finalization")
			want := lifecycle.FinalizationObservation{Study: e.study}
			if happened {
				want.Fence, want.Held, want.Holder = 1, true, "f"
			}
			if fin != want {
				e.t.Fatalf("finalization claim %+v, want %+v", fin, want)
			}
			e.finish(e.running("w"))
		},
	},
}

// newCrashEnv opens a fresh journal with a study and a finished trial, so
// that the log and the study are not empty.
func newCrashEnv(t *testing.T) *crashEnv {
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	e := &crashEnv{t: t, ctx: context.Background(), j: faulty.New(st, faulty.Options{})}
	e.s = newJournalStorage(t, e.j)
	var err error
	e.study, err = e.s.CreateStudy(e.ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	tok := e.running("first")
	e.must(e.s.Terminal(e.ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{0}}), "terminal")
	return e
}

// verifyStudy checks what an auditor checks: every run of the case
// verifies, each terminal trial's run is sealed and included in the log at
// the current checkpoint, and the journal's view of the study is the
// storage's.
func verifyStudy(t *testing.T, ctx context.Context, s *journalstore.Storage, j store.Journal, study lifecycle.StudyID) {
	t.Helper()
	checkListing(t, ctx, s, j, study)
	if err := checkRebuild(ctx, s, j); err != nil {
		t.Fatal(err)
	}
	v, err := journalstore.ReadStudyView(ctx, j, study)
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.ParseCaseID(string(study))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := j.CaseRuns(ctx, c, nil, store.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != len(v.Trials)+1 {
		t.Fatalf("case has %d runs; the study has %d trials and its study run", len(runs), len(v.Trials))
	}
	cp, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sealed := map[string]bool{}
	for _, tv := range v.Trials {
		sealed[string(tv.Trial)] = tv.Sealed
	}
	for _, run := range runs {
		head, err := j.Verify(ctx, run)
		if err != nil {
			t.Fatalf("verify run %s: %v", run, err)
		}
		inc, err := j.InclusionProof(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if (inc != nil) != sealed[run.String()] {
			t.Fatalf("run %s: inclusion proof %v, view says sealed %t", run, inc != nil, sealed[run.String()])
		}
		if inc == nil {
			continue
		}
		hs := make([]log.Hash, len(inc.Proof))
		for i, h := range inc.Proof {
			hs[i] = log.Hash(h)
		}
		if inc.Leaf != head || inc.Size != cp.Size {
			t.Fatalf("run %s: leaf %s at size %d, head %s, checkpoint size %d", run, inc.Leaf, inc.Size, head, cp.Size)
		}
		if err := log.VerifyInclusion(log.Hash(inc.Leaf), inc.Index, cp.Size, hs, log.Hash(cp.Root)); err != nil {
			t.Fatalf("run %s is not included in the checkpoint: %v", run, err)
		}
	}
}

// TestJournalStorageCrashBetweenWrites fails each write of each transition,
// before it reaches the store and after it landed (lost acknowledgement),
// and then continues with the same storage (whose view the failure
// discarded) or with a new one (a restarted process). The transition must
// be found complete exactly when its commit point landed, the study must
// go on working, and every run must verify, terminal ones sealed.
func TestJournalStorageCrashBetweenWrites(t *testing.T) {
	t.Parallel()
	for _, sc := range crashScenarios {
		t.Run(sc.name, func(t *testing.T) {
			// The write sequence is part of the protocol: check it.
			e := newCrashEnv(t)
			sc.setup(e)
			arm(e.j, 1<<30, false)
			err := sc.op(e)
			got := disarm(e.j)
			if err != nil || !slices.Equal(got, sc.writes) {
				t.Fatalf("clean run: writes %q (want %q), err %v", got, sc.writes, err)
			}
			for k := 1; k <= len(sc.writes); k++ {
				for _, landed := range []bool{false, true} {
					for _, restart := range []bool{false, true} {
						name := fmt.Sprintf("fail-%d-%s/landed=%t/restart=%t", k, sc.writes[k-1], landed, restart)
						t.Run(name, func(t *testing.T) {
							e := newCrashEnv(t)
							sc.setup(e)
							arm(e.j, k, landed)
							err := sc.op(e)
							disarm(e.j)
							// The derived rows commit with the study run
							// record or not at all: whatever failed, they
							// are at the journal's head before any recovery.
							checkRowsAtHead(t, e.ctx, e.j, e.study)
							happened := k > sc.commit || (k == sc.commit && landed)
							if err != nil && lifecycle.KindOf(err) != lifecycle.KindStorage {
								t.Fatalf("the failure surfaced as %v", err)
							}
							if err == nil && !happened {
								t.Fatalf("the operation succeeded without its commit point")
							}
							if restart {
								e.must(e.s.Close(), "the first process ends")
								e.s = newJournalStorage(t, e.j)
							}
							sc.check(e, happened)
							verifyStudy(t, e.ctx, e.s, e.j, e.study)
						})
					}
				}
			}
			// A second failure, during the recovery itself: the next
			// operation fails, the one after recovers.
			for k := 1; k <= len(sc.writes); k++ {
				t.Run(fmt.Sprintf("fail-%d-then-recovery-fails", k), func(t *testing.T) {
					e := newCrashEnv(t)
					sc.setup(e)
					arm(e.j, k, true)
					sc.op(e)
					disarm(e.j)
					checkRowsAtHead(t, e.ctx, e.j, e.study)
					happened := k >= sc.commit
					arm(e.j, 1, false)
					_, err := e.s.InspectStudy(e.ctx, e.study)
					recovery := disarm(e.j)
					t.Logf("recovery writes %q: %v", recovery, err)
					if len(recovery) > 0 && lifecycle.KindOf(err) != lifecycle.KindStorage {
						t.Fatalf("a recovery whose first write failed: %v", err)
					}
					sc.check(e, happened)
					verifyStudy(t, e.ctx, e.s, e.j, e.study)
				})
			}
		})
	}
}
