package lifecycletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/runseal/runseal/lifecycle"
)

// model is the simplest description of the contract: what each trial,
// outbox record and the finalization claim must look like after any
// sequence of operations.
type model struct {
	trials  []*modelTrial
	records []*modelRecord
	fin     lifecycle.FinalizationObservation
	tokens  []lifecycle.FinalizationToken // every finalization token issued
}

type modelTrial struct {
	id     lifecycle.TrialID
	lease  lifecycle.LeaseObservation
	tokens []lifecycle.TrialOwnerToken // every owner token issued
	seen   []lifecycle.LeaseObservation
}

type modelRecord struct {
	key       lifecycle.OutboxKey
	phase     lifecycle.OutboxPhase
	effects   []lifecycle.OutboxEffect
	completed map[string]bool
}

var phases = []lifecycle.OutboxPhase{lifecycle.PhaseInitial, lifecycle.PhaseCallbacks, lifecycle.PhaseEffects, lifecycle.PhaseDone}

func kindOf(t *rapid.T, err error, allowed ...lifecycle.Kind) lifecycle.Kind {
	t.Helper()
	k := lifecycle.KindOf(err)
	if err == nil {
		return 0
	}
	for _, a := range allowed {
		if k == a {
			return k
		}
	}
	t.Fatalf("unexpected error %v", err)
	return k
}

// RunModel runs random operation sequences (pgregory.net/rapid) against a
// backend and against the simplest description of the contract, a model of
// what each trial, outbox record and the finalization claim must look like
// after any sequence, and fails on the first difference. open returns a
// fresh backend and, if the backend is durable, a function that restarts
// it (the same data, a new process); restarting is then one of the random
// actions.
func RunModel(t *testing.T, open func(*rapid.T) (Backend, func() Backend)) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		s, restart := open(t)
		study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
		if err != nil {
			t.Fatal(err)
		}
		m := &model{fin: lifecycle.FinalizationObservation{Study: study}}
		owners := rapid.SampledFrom([]string{"a", "b", "c"})

		pickTrial := func(t *rapid.T) *modelTrial {
			if len(m.trials) == 0 {
				t.Skip("no trials")
			}
			return rapid.SampledFrom(m.trials).Draw(t, "trial")
		}
		// pickToken returns a token that is current when the trial runs,
		// or one of the stale or forged tokens a confused caller holds.
		pickToken := func(t *rapid.T, tr *modelTrial) lifecycle.TrialOwnerToken {
			cands := append([]lifecycle.TrialOwnerToken{
				{Trial: tr.id, Owner: tr.lease.Owner, Epoch: tr.lease.Epoch},
				{Trial: tr.id, Owner: "a", Epoch: tr.lease.Epoch + 1},
			}, tr.tokens...)
			return rapid.SampledFrom(cands).Draw(t, "token")
		}
		current := func(tr *modelTrial, tok lifecycle.TrialOwnerToken) bool {
			l := tr.lease
			return l.State == lifecycle.TrialRunning && tok.Owner == l.Owner && tok.Epoch == l.Epoch
		}
		end := func(tr *modelTrial, state lifecycle.TrialState, intent bool) {
			if intent {
				m.records = append(m.records, &modelRecord{key: lifecycle.OutboxKey{Trial: tr.id, Epoch: tr.lease.Epoch}, phase: lifecycle.PhaseInitial, completed: map[string]bool{}})
			}
			tr.lease.State, tr.lease.Owner = state, ""
		}

		actions := map[string]func(*rapid.T){
			"reserve": func(t *rapid.T) {
				budget := rapid.Uint64Range(1, 12).Draw(t, "budget")
				out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: budget})
				kindOf(t, err)
				if uint64(len(m.trials)) >= budget {
					if out.Status != lifecycle.ReservationExhausted {
						t.Fatalf("%d trials, budget %d: want exhausted, got %+v", len(m.trials), budget, out)
					}
					return
				}
				if out.Status != lifecycle.ReservationCreated || out.Number != uint64(len(m.trials)) {
					t.Fatalf("want created number %d, got %+v", len(m.trials), out)
				}
				m.trials = append(m.trials, &modelTrial{id: out.Trial, lease: lifecycle.LeaseObservation{Trial: out.Trial, State: lifecycle.TrialWaiting}})
			},
			"abandon": func(t *rapid.T) {
				tr := pickTrial(t)
				won, err := s.Abandon(ctx, lifecycle.AbandonRequest{Trial: tr.id})
				kindOf(t, err)
				if want := tr.lease.State == lifecycle.TrialWaiting; won != want {
					t.Fatalf("abandon of a %s trial: got %v", tr.lease.State, won)
				}
				if won {
					tr.lease.State = lifecycle.TrialFailed
				}
			},
			"claim": func(t *rapid.T) {
				tr := pickTrial(t)
				owner := owners.Draw(t, "owner")
				tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: tr.id, Owner: owner})
				claimable := tr.lease.State == lifecycle.TrialWaiting || tr.lease.State == lifecycle.TrialPaused
				if k := kindOf(t, err, lifecycle.KindLeaseLost); (k == 0) != claimable {
					t.Fatalf("claim of a %s trial: %v", tr.lease.State, err)
				}
				if !claimable {
					return
				}
				// A claim starts a new owner epoch, greater than every
				// earlier one. It need not be the previous one plus 1: a
				// journal backend's first claim moves past the epoch its
				// creation records were written at (spec/lifecycle.md).
				if tok.Trial != tr.id || tok.Owner != owner || tok.Epoch <= tr.lease.Epoch {
					t.Fatalf("claim token %+v, model lease before the claim %+v", tok, tr.lease)
				}
				tr.lease = lifecycle.LeaseObservation{Trial: tr.id, State: lifecycle.TrialRunning, Owner: owner, Epoch: tok.Epoch}
				tr.tokens = append(tr.tokens, tok)
			},
			"renew": func(t *rapid.T) {
				tr := pickTrial(t)
				tok := pickToken(t, tr)
				_, err := s.Renew(ctx, lifecycle.RenewRequest{Owner: tok})
				ok := current(tr, tok)
				if k := kindOf(t, err, lifecycle.KindLeaseLost, lifecycle.KindInvalid); (k == 0) != ok {
					t.Fatalf("renew with %+v of %+v: %v", tok, tr.lease, err)
				}
				if ok {
					tr.lease.HeartbeatSeq++
				}
			},
			"pause": func(t *rapid.T) {
				tr := pickTrial(t)
				tok := pickToken(t, tr)
				err := s.FencedMutate(ctx, lifecycle.FencedMutationRequest{Owner: tok, Pause: true})
				ok := current(tr, tok)
				if k := kindOf(t, err, lifecycle.KindLeaseLost, lifecycle.KindInvalid); (k == 0) != ok {
					t.Fatalf("pause with %+v of %+v: %v", tok, tr.lease, err)
				}
				if ok {
					tr.lease.State, tr.lease.Owner = lifecycle.TrialPaused, ""
				}
			},
			"terminal": func(t *rapid.T) {
				tr := pickTrial(t)
				tok := pickToken(t, tr)
				intent := rapid.Bool().Draw(t, "intent")
				state := rapid.SampledFrom([]lifecycle.TrialState{lifecycle.TrialComplete, lifecycle.TrialPruned, lifecycle.TrialFailed}).Draw(t, "state")
				req := lifecycle.TerminalRequest{Owner: tok, State: state}
				if state == lifecycle.TrialComplete {
					req.Values = []float64{1}
				}
				var err error
				if intent {
					_, err = s.TerminalWithIntent(ctx, req, lifecycle.FinalizationIntent{Kind: "tell"})
				} else {
					err = s.Terminal(ctx, req)
				}
				ok := current(tr, tok)
				if k := kindOf(t, err, lifecycle.KindLeaseLost, lifecycle.KindInvalid); (k == 0) != ok {
					t.Fatalf("terminal with %+v of %+v: %v", tok, tr.lease, err)
				}
				if ok {
					end(tr, state, intent)
				}
			},
			"observe": func(t *rapid.T) {
				tr := pickTrial(t)
				obs, err := s.Observe(ctx, tr.id)
				kindOf(t, err)
				tr.seen = append(tr.seen, obs)
			},
			"fail_stale": func(t *rapid.T) {
				tr := pickTrial(t)
				if len(tr.seen) == 0 {
					t.Skip("never observed")
				}
				obs := rapid.SampledFrom(tr.seen).Draw(t, "observation")
				won, err := s.FailStale(ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Second, Intent: lifecycle.FinalizationIntent{Kind: "stale"}})
				kindOf(t, err)
				if want := tr.lease.State == lifecycle.TrialRunning && obs.Equal(tr.lease); won != want {
					t.Fatalf("fail_stale with %+v of %+v: got %v", obs, tr.lease, won)
				}
				if won {
					end(tr, lifecycle.TrialFailed, true)
				}
			},
			"acquire": func(t *rapid.T) {
				obs := m.fin
				if rapid.Bool().Draw(t, "stale observation") {
					obs.HeartbeatSeq++
				}
				holder := owners.Draw(t, "holder")
				tok, err := s.AcquireFinalization(ctx, lifecycle.FinalizationAcquireRequest{Study: study, Holder: holder, Observed: obs})
				ok := obs == m.fin
				if k := kindOf(t, err, lifecycle.KindConflict); (k == 0) != ok {
					t.Fatalf("acquire with %+v of %+v: %v", obs, m.fin, err)
				}
				if ok {
					m.fin.Fence++
					m.fin.Held, m.fin.Holder = true, holder
					m.tokens = append(m.tokens, tok)
				}
			},
			"renew_or_release_finalization": func(t *rapid.T) {
				if len(m.tokens) == 0 {
					t.Skip("no finalization token")
				}
				tok := rapid.SampledFrom(m.tokens).Draw(t, "finalization token")
				ok := m.fin.Held && tok.Fence == m.fin.Fence && tok.Holder == m.fin.Holder
				var err error
				release := rapid.Bool().Draw(t, "release")
				if release {
					err = s.ReleaseFinalization(ctx, tok)
				} else {
					_, err = s.RenewFinalization(ctx, tok)
				}
				if k := kindOf(t, err, lifecycle.KindLeaseLost); (k == 0) != ok {
					t.Fatalf("renew/release with %+v of %+v: %v", tok, m.fin, err)
				}
				switch {
				case ok && release:
					m.fin.Held, m.fin.Holder = false, ""
				case ok:
					m.fin.HeartbeatSeq++
				}
			},
			"advance": func(t *rapid.T) {
				if len(m.records) == 0 {
					t.Skip("no outbox records")
				}
				r := rapid.SampledFrom(m.records).Draw(t, "record")
				target := rapid.SampledFrom(phases).Draw(t, "phase")
				req := lifecycle.OutboxAdvanceRequest{Key: r.key, Phase: target}
				if target == lifecycle.PhaseEffects {
					if r.effects != nil {
						req.Effects = r.effects
					} else {
						for i := range rapid.IntRange(0, 2).Draw(t, "effects") {
							req.Effects = append(req.Effects, lifecycle.OutboxEffect{Name: fmt.Sprintf("e%d", i), Kind: lifecycle.EffectExternal})
						}
					}
				}
				owned := rapid.Bool().Draw(t, "owned")
				var got lifecycle.OutboxPhase
				var err error
				tok := lifecycle.FinalizationToken{Study: study, Holder: m.fin.Holder, Fence: m.fin.Fence}
				if owned {
					got, err = s.AdvanceOutboxOwned(ctx, tok, req)
				} else {
					got, err = s.AdvanceOutbox(ctx, req)
				}
				cur := r.phase.Rank()
				allowed := (owned && m.fin.Held) || (!owned && m.fin.Fence == 0)
				var want lifecycle.OutboxPhase
				var wantKind lifecycle.Kind
				switch {
				case !allowed:
					wantKind = lifecycle.KindLeaseLost
				case target.Rank() <= cur:
					want = r.phase
				case target.Rank() > cur+1:
					wantKind = lifecycle.KindConflict
				case r.phase == lifecycle.PhaseEffects && len(r.completed) < len(r.effects):
					want = r.phase
				default:
					want = target
				}
				if k := kindOf(t, err, lifecycle.KindLeaseLost, lifecycle.KindConflict); k != wantKind || got != want {
					t.Fatalf("advance %v from %s to %s (owned %v, claim %+v): got %q, %v; want %q, %v", r.key, r.phase, target, owned, m.fin, got, err, want, wantKind)
				}
				if wantKind == 0 && want == target && target.Rank() == cur+1 {
					r.phase = target
					if target == lifecycle.PhaseEffects {
						r.effects = append([]lifecycle.OutboxEffect{}, req.Effects...)
					}
				}
			},
			"complete_effect": func(t *rapid.T) {
				var open []*modelRecord
				for _, r := range m.records {
					if len(r.effects) > 0 {
						open = append(open, r)
					}
				}
				if len(open) == 0 {
					t.Skip("no effects")
				}
				r := rapid.SampledFrom(open).Draw(t, "record")
				e := rapid.SampledFrom(r.effects).Draw(t, "effect")
				err := s.CompleteOutboxEffect(ctx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: r.key, Name: e.Name}})
				kindOf(t, err)
				r.completed[e.Name] = true
			},
			"": func(t *rapid.T) {
				st, err := s.InspectStudy(ctx, study)
				kindOf(t, err)
				if st.Trials != uint64(len(m.trials)) || st.Finalization != m.fin || st.TerminalSeq != uint64(len(m.records)) {
					t.Fatalf("study %+v, model has %d trials, %d records, claim %+v", st, len(m.trials), len(m.records), m.fin)
				}
				for _, tr := range m.trials {
					obs, err := s.Observe(ctx, tr.id)
					kindOf(t, err)
					if !obs.Equal(tr.lease) {
						t.Fatalf("trial %s: store %+v, model %+v", tr.id, obs, tr.lease)
					}
				}
				for _, r := range m.records {
					rec, ok, err := s.GetOutbox(ctx, r.key)
					kindOf(t, err)
					if !ok || rec.Phase != r.phase || len(rec.Completed) != len(r.completed) || len(rec.Effects) != len(r.effects) {
						t.Fatalf("record %v: store %+v, model %+v", r.key, rec, r)
					}
				}
			},
		}
		if restart != nil {
			actions["restart"] = func(*rapid.T) { s = restart() }
		}
		t.Repeat(actions)
	})
}
