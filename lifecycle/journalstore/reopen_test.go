package journalstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/faulty"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/store/storetest"
)

// studyEnv drives one study for the tests below.
type studyEnv struct {
	t     *testing.T
	ctx   context.Context
	s     *journalstore.Storage
	study lifecycle.StudyID
}

func (e *studyEnv) must(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func (e *studyEnv) reserve(key string) lifecycle.TrialID {
	e.t.Helper()
	out, err := e.s.ReserveAndCreateIfBudget(e.ctx, lifecycle.ReserveAndCreateRequest{Study: e.study, MaxTrials: 50, Key: key})
	e.must(err, "reserve")
	if out.Status != lifecycle.ReservationCreated {
		e.t.Fatalf("reserve: %+v", out)
	}
	return out.Trial
}

func (e *studyEnv) claim(tr lifecycle.TrialID, owner string) lifecycle.TrialOwnerToken {
	e.t.Helper()
	tok, err := e.s.Claim(e.ctx, lifecycle.ClaimRequest{Trial: tr, Owner: owner, HeartbeatAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)})
	e.must(err, "claim")
	return tok
}

func (e *studyEnv) advance(fin lifecycle.FinalizationToken, key lifecycle.OutboxKey, p lifecycle.OutboxPhase, effects ...lifecycle.OutboxEffect) {
	e.t.Helper()
	got, err := e.s.AdvanceOutboxOwned(e.ctx, fin, lifecycle.OutboxAdvanceRequest{
		Key: key, Phase: p, Effects: effects,
		States: []lifecycle.StateBlob{{Scope: lifecycle.ScopeStudy, Name: "sampler", Kind: "tpe", Version: 1, Data: []byte(string(p))}},
	})
	e.must(err, "advance")
	if got != p {
		e.t.Fatalf("advance to %s: cursor %s", p, got)
	}
}

func constraints(vs ...float64) lifecycle.StateBlob {
	data, _ := json.Marshal(vs)
	return lifecycle.StateBlob{Scope: lifecycle.ScopeTrial, Name: lifecycle.ConstraintsStateName, Kind: lifecycle.ConstraintsKind, Version: lifecycle.ConstraintsVersion, Data: data}
}

// TestJournalStorageReopen closes the journal in the middle of a study, in
// every state a trial and an outbox record can be in, reopens it in a new
// JournalStorage, checks that the rebuilt view is the one the first
// process had, and carries on: an owner's token and a finalizer's token
// survive the restart, since lifecycle leases do not expire.
func TestJournalStorageReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	st := openJournal(t, path)
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 2, Constraints: 1})
	e.must(err, "create study")

	// A running trial with heartbeats, history and state.
	running := e.claim(e.reserve(""), "worker-a")
	for i := range 2 {
		_, err := e.s.Renew(ctx, lifecycle.RenewRequest{Owner: running, HeartbeatAt: time.Date(2030, 1, 1, 0, 0, i+1, 5, time.UTC)})
		e.must(err, "renew")
	}
	e.must(e.s.FencedMutate(ctx, lifecycle.FencedMutationRequest{
		Owner: running, Params: []lifecycle.Param{{Name: "lr", Value: 0.1, Distribution: json.RawMessage(`{"low": 0, "high": 1}`)}},
		Intermediate: []lifecycle.IntermediateValue{{Step: 0, Value: 0.5}}, Attrs: map[string]json.RawMessage{"note": json.RawMessage(`"hi"`)},
		States: []lifecycle.StateBlob{constraints(-1), {Scope: lifecycle.ScopeTrial, Name: "ckpt", Kind: "ckpt", Version: 1, Data: []byte{0, 1, 2}}},
	}), "mutate")
	// A paused trial, a waiting one reserved with a key, an unmanaged one.
	paused := e.claim(e.reserve(""), "worker-b")
	e.must(e.s.FencedMutate(ctx, lifecycle.FencedMutationRequest{Owner: paused, Pause: true}), "pause")
	waiting := e.reserve("key-1")
	_, err = e.s.CreateUnmanagedTrial(ctx, e.study, lifecycle.TrialComplete)
	e.must(err, "unmanaged trial")
	// A finished trial whose record is in its effects phase, under a
	// finalizer; a stale-failed trial with an initial record.
	obs, err := e.s.ObserveFinalization(ctx, e.study)
	e.must(err, "observe finalization")
	fin, err := e.s.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: e.study, Holder: "finalizer", Observed: obs})
	e.must(err, "acquire finalization")
	done := e.claim(e.reserve(""), "worker-c")
	doneKey, err := e.s.TerminalWithIntentOwned(ctx, fin, lifecycle.TerminalRequest{Owner: done, State: lifecycle.TrialFailed}, lifecycle.FinalizationIntent{Kind: "tell"})
	e.must(err, "terminal")
	e.advance(fin, doneKey, lifecycle.PhaseCallbacks)
	e.advance(fin, doneKey, lifecycle.PhaseEffects,
		lifecycle.OutboxEffect{Name: "notify", Kind: lifecycle.EffectExternal, Payload: json.RawMessage(`{"to": "ops"}`)},
		lifecycle.OutboxEffect{Name: "retry", Kind: lifecycle.EffectReplacement, Replacement: &lifecycle.ReplacementSpec{MaxTrials: 50, Params: []lifecycle.Param{{Name: "lr", Value: 0.2}}}})
	stale := e.claim(e.reserve(""), "worker-d")
	won, err := e.s.FailStale(ctx, lifecycle.FailStaleRequest{Observed: func() lifecycle.LeaseObservation {
		o, err := e.s.Observe(ctx, stale.Trial)
		e.must(err, "observe")
		return o
	}(), Grace: time.Second, Intent: lifecycle.FinalizationIntent{Kind: "stale"}})
	if err != nil || !won {
		t.Fatalf("fail stale: %v, %v", won, err)
	}
	e.must(e.s.PutFinalizedState(ctx, lifecycle.FinalizedStateRequest{Trial: stale.Trial, State: lifecycle.StateBlob{Scope: lifecycle.ScopeTrial, Name: "final", Kind: "k", Version: 1, Data: []byte("f")}}), "finalized state")

	before, err := snapshot(ctx, e.s)
	e.must(err, "snapshot")
	// The process ends here: the store closes under the study.
	e.must(e.s.Close(), "close the storage")
	e.must(st.Close(), "close")

	st = openJournal(t, path)
	t.Cleanup(func() { st.Close() })
	e.s = newJournalStorage(t, st)
	after, err := snapshot(ctx, e.s)
	e.must(err, "snapshot after reopening")
	if !bytes.Equal(before, after) {
		t.Fatalf("the reopened journal shows another study:\n before %s\n after  %s", before, after)
	}

	// Carry on with the tokens the first process handed out.
	o, err := e.s.Renew(ctx, lifecycle.RenewRequest{Owner: running})
	e.must(err, "the owner renews after the restart")
	if o.HeartbeatSeq != 3 || o.Epoch != running.Epoch {
		t.Fatalf("renew after restart: %+v", o)
	}
	_, err = e.s.TerminalWithIntentOwned(ctx, fin, lifecycle.TerminalRequest{Owner: running, State: lifecycle.TrialComplete, Values: []float64{1, 2},
		States: []lifecycle.StateBlob{constraints(0.5)}}, lifecycle.FinalizationIntent{Kind: "tell"})
	e.must(err, "terminal with intent under the finalizer after the restart")
	again := e.claim(paused.Trial, "worker-e")
	if again.Epoch <= paused.Epoch {
		t.Fatalf("claim after restart: epoch %d after %d", again.Epoch, paused.Epoch)
	}
	e.must(e.s.Terminal(ctx, lifecycle.TerminalRequest{Owner: again, State: lifecycle.TrialPruned}), "terminal")
	if tr := e.reserve("key-1"); tr != waiting {
		t.Fatalf("a reservation key after the restart: %s, first %s", tr, waiting)
	}
	if won, err := e.s.Abandon(ctx, lifecycle.AbandonRequest{Trial: waiting}); err != nil || !won {
		t.Fatalf("abandon: %v, %v", won, err)
	}
	e.must(e.s.CompleteOutboxEffect(ctx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: doneKey, Name: "notify"}}), "complete effect")
	repl, err := e.s.CreateReplacement(ctx, lifecycle.OutboxEffectKey{Outbox: doneKey, Name: "retry"})
	e.must(err, "create replacement")
	e.advance(fin, doneKey, lifecycle.PhaseDone)
	e.must(e.s.Terminal(ctx, lifecycle.TerminalRequest{Owner: e.claim(repl.Trial, "worker-f"), State: lifecycle.TrialComplete, Values: []float64{3, 4}}), "finish the replacement")
	e.must(e.s.ReleaseFinalization(ctx, fin), "release finalization")

	v, err := e.s.StudyView(ctx, e.study)
	e.must(err, "study view")
	verifyStudy(t, ctx, e.s, st, e.study)
	for _, tv := range v.Trials {
		if tv.Managed && (!tv.State.Terminal() || !tv.Sealed) || !tv.Managed && tv.Sealed {
			t.Errorf("at the end every managed trial is terminal and sealed: %+v", tv)
		}
	}
}

// TestJournalStorageLeaseExpiryIrrelevant lets a century pass on the
// journal's clock: journal leases expire, lifecycle leases do not, and the
// owner's token must keep working until FailStale or its own terminal.
func TestJournalStorageLeaseExpiryIrrelevant(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewFakeClock()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	tok := e.claim(e.reserve(""), "owner")
	clk.Advance(150 * 365 * 24 * time.Hour)
	if runs, err := st.AbandonedRuns(ctx, 10); err != nil || len(runs) == 0 {
		t.Fatalf("the journal lease did not expire: %v, %v", runs, err)
	}
	_, err = e.s.Renew(ctx, lifecycle.RenewRequest{Owner: tok})
	e.must(err, "renew after the journal lease expired")
	// A stale failure still needs the exact observation, and wins with it.
	obs, err := e.s.Observe(ctx, tok.Trial)
	e.must(err, "observe")
	won, err := e.s.FailStale(ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: lifecycle.FinalizationIntent{Kind: "stale"}})
	if err != nil || !won {
		t.Fatalf("fail stale: %v, %v", won, err)
	}
	verifyStudy(t, ctx, e.s, st, e.study)
}

// TestJournalStudyExportAndVerify shows that a study is runs like any
// other: its case lists them, its case history holds every transition of
// every run, each run verifies, and each terminal trial is a sealed leaf
// whose inclusion proof verifies against the checkpoint.
func TestJournalStudyExportAndVerify(t *testing.T) {
	ctx := context.Background()
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	other, err := e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create another study")
	for i, state := range []lifecycle.TrialState{lifecycle.TrialComplete, lifecycle.TrialPruned, lifecycle.TrialFailed, lifecycle.TrialRunning} {
		tok := e.claim(e.reserve(""), "w")
		if state == lifecycle.TrialRunning {
			continue
		}
		var values []float64
		if state == lifecycle.TrialComplete {
			values = []float64{float64(i)}
		}
		_, err := e.s.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: tok, State: state, Values: values}, lifecycle.FinalizationIntent{Kind: "tell"})
		e.must(err, "terminal")
	}
	_, err = e.s.Abandon(ctx, lifecycle.AbandonRequest{Trial: e.reserve("")})
	e.must(err, "abandon")
	_, err = e.s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: other, MaxTrials: 1})
	e.must(err, "reserve in the other study")

	verifyStudy(t, ctx, e.s, st, e.study)

	c, err := store.ParseCaseID(string(e.study))
	e.must(err, "case id")
	hist, err := st.CaseHistory(ctx, c, store.MaxLimit)
	e.must(err, "case history")
	kinds := map[string]int{}
	runs := map[store.RunID]bool{}
	for _, r := range hist {
		if r.Case != c {
			t.Fatalf("case history holds a record of another case: %+v", r.Body)
		}
		kinds[r.Kind]++
		runs[r.Run] = true
	}
	want := map[string]int{
		store.KindRunAdmitted: 6, journalstore.RecordStudyOpened: 1, journalstore.RecordTrialReserved: 5, journalstore.RecordTrialCreated: 5,
		journalstore.RecordTrialClaimed: 4, journalstore.RecordTrialTerminal: 8, store.KindRunConcluded: 4,
	}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("case history: %d %s records, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
	if len(runs) != 6 {
		t.Errorf("case history spans %d runs, want the study run and 5 trial runs", len(runs))
	}
	// The sealed outcomes are the journal's own: listed by outcome.
	for _, o := range []string{"trial-complete", "trial-pruned"} {
		if n, err := st.CountByOutcome(ctx, o); err != nil || n != 1 {
			t.Errorf("runs concluded %s: %d, %v", o, n, err)
		}
	}
	if n, err := st.CountByOutcome(ctx, "trial-failed"); err != nil || n != 2 {
		t.Errorf("runs concluded trial-failed: %d, %v", n, err)
	}
	// Trial runs are listed by their source like any admitted runs.
	recent, err := st.RecentRunsFrom(ctx, journalstore.TrialSource, nil, 100)
	e.must(err, "recent trial runs")
	if len(recent) != 6 {
		t.Errorf("%d runs admitted from %s, want 6", len(recent), journalstore.TrialSource)
	}
}

// TestJournalStorageRefusesSharedStoreWithoutLock: a shared store must
// offer Atomic() and a per-key lock (spec/lifecycle.md 14.2); one that
// does not is refused rather than written from a view another process
// may move.
func TestJournalStorageRefusesSharedStoreWithoutLock(t *testing.T) {
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	// faulty.Shared claims several processes write the store, and offers
	// no advisory lock to serialize a study across them.
	_, err := journalstore.New(faulty.NewShared(st))
	if lifecycle.KindOf(err) != lifecycle.KindUnsupported {
		t.Fatalf("a shared store: want Unsupported, got %v", err)
	}
}

func TestStudyViewText(t *testing.T) {
	ctx := context.Background()
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	tok := e.claim(e.reserve(""), "worker-1")
	key, err := e.s.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{1}}, lifecycle.FinalizationIntent{Kind: "tell"})
	e.must(err, "terminal")
	e.claim(e.reserve(""), "worker-2")
	obs, err := e.s.ObserveFinalization(ctx, e.study)
	e.must(err, "observe finalization")
	fin, err := e.s.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: e.study, Holder: "fin-1", Observed: obs})
	e.must(err, "acquire")
	e.advance(fin, key, lifecycle.PhaseCallbacks)
	e.advance(fin, key, lifecycle.PhaseEffects, lifecycle.OutboxEffect{Name: "mail", Kind: lifecycle.EffectExternal})

	v, err := journalstore.ReadStudyView(ctx, st, e.study)
	e.must(err, "read study view")
	var b strings.Builder
	e.must(v.WriteText(&b), "write text")
	out := b.String()
	for _, want := range []string{
		"study " + string(e.study), `finalization: held by "fin-1" at fence 1`, "worker-2", "running",
		"complete", "effects", "mail", "study state: sampler",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text view lacks %q:\n%s", want, out)
		}
	}
	if len(v.Outbox) != 1 || len(v.Outbox[0].PendingEffects) != 1 || v.Trials[1].Owner != "worker-2" || !v.Trials[0].Sealed {
		t.Errorf("view: %+v", v)
	}
	if _, err := journalstore.ReadStudyView(ctx, st, "not-a-study"); lifecycle.KindOf(err) != lifecycle.KindNotFound {
		t.Errorf("view of an unknown study: %v", err)
	}
	if _, err := journalstore.ReadStudyView(ctx, st, lifecycle.StudyID(store.NewCaseID().String())); lifecycle.KindOf(err) != lifecycle.KindNotFound {
		t.Errorf("view of a case with no study: %v", err)
	}
}

// TestReadStudyViewWhileWriting reads a study from the journal while a
// JournalStorage drives it, as `journal study show` does beside a running
// service: every read must succeed, and what it shows must only move
// forward.
func TestReadStudyViewWhileWriting(t *testing.T) {
	ctx := context.Background()
	st := openJournal(t, filepath.Join(t.TempDir(), "journal.db"))
	t.Cleanup(func() { st.Close() })
	e := &studyEnv{t: t, ctx: ctx, s: newJournalStorage(t, st)}
	var err error
	e.study, err = e.s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
	e.must(err, "create study")
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 15 {
				out, err := e.s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: e.study, MaxTrials: 1000})
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				tok, err := e.s.Claim(ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: fmt.Sprint("w", w)})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if _, err := e.s.Renew(ctx, lifecycle.RenewRequest{Owner: tok}); err != nil {
					t.Errorf("renew: %v", err)
				}
				if i%3 == 0 {
					obs, _ := e.s.Observe(ctx, tok.Trial)
					e.s.FailStale(ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: lifecycle.FinalizationIntent{Kind: "stale"}})
					continue
				}
				if _, err := e.s.TerminalWithIntent(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{1}}, lifecycle.FinalizationIntent{Kind: "tell"}); err != nil {
					t.Errorf("terminal: %v", err)
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			var trials, records, ended int
			for {
				select {
				case <-done:
					return
				default:
				}
				v, err := journalstore.ReadStudyView(ctx, st, e.study)
				if err != nil {
					t.Errorf("read study view while writing: %v", err)
					return
				}
				n := 0
				for _, tv := range v.Trials {
					if tv.State.Terminal() {
						n++
					}
				}
				if len(v.Trials) < trials || len(v.Outbox) < records || n < ended {
					t.Errorf("the view went back: %d trials, %d records, %d ended after %d, %d, %d", len(v.Trials), len(v.Outbox), n, trials, records, ended)
				}
				trials, records, ended = len(v.Trials), len(v.Outbox), n
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	verifyStudy(t, ctx, e.s, st, e.study)
}
