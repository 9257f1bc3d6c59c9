package journalstore

import (
	"context"
	"slices"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// ReserveAndCreateIfBudget implements [lifecycle.Storage]: TrialReserved in the study
// run, then the trial run's RunAdmitted and TrialCreated.
func (s *Storage) ReserveAndCreateIfBudget(ctx context.Context, req lifecycle.ReserveAndCreateRequest) (lifecycle.ReservationOutcome, error) {
	const op = "reserve_and_create_if_budget"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.ReservationOutcome{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.ReservationOutcome{}, model.WithOp(op, err)
	}
	st, err := s.openStudy(ctx, op, req.Study)
	if err != nil {
		return lifecycle.ReservationOutcome{}, err
	}
	defer st.unlock()
	v := st.v
	if req.Key != "" {
		if out, ok := v.Keys[req.Key]; ok {
			return out, nil
		}
	}
	if v.Study.Trials >= req.MaxTrials {
		return lifecycle.ReservationOutcome{Status: lifecycle.ReservationExhausted}, nil
	}
	id := lifecycle.TrialID(store.NewRunID().String())
	if err := s.transition(ctx, op, st, RecordTrialReserved, fTrialReserved{Trial: id, Number: v.Study.Trials, Key: req.Key, Managed: true}); err != nil {
		return lifecycle.ReservationOutcome{}, err
	}
	t := st.v.byID[id]
	return lifecycle.ReservationOutcome{Status: lifecycle.ReservationCreated, Trial: t.ID, Number: t.Number}, nil
}

// Abandon implements [lifecycle.Storage]: TrialTerminal (cause abandoned) in the
// study run, then in the trial run under a fresh epoch, and the seal.
func (s *Storage) Abandon(ctx context.Context, req lifecycle.AbandonRequest) (bool, error) {
	const op = "abandon"
	if err := model.Begin(ctx, op); err != nil {
		return false, err
	}
	st, t, err := s.openManaged(ctx, op, req.Trial)
	if err != nil {
		return false, err
	}
	defer st.unlock()
	if t.Lease.State != lifecycle.TrialWaiting {
		return false, nil
	}
	err = s.transition(ctx, op, st, RecordTrialTerminal, fStudyTerminal{Trial: t.ID, State: lifecycle.TrialFailed, Cause: endAbandoned})
	return err == nil, err
}

// Observe implements [lifecycle.Storage].
func (s *Storage) Observe(ctx context.Context, trial lifecycle.TrialID) (lifecycle.LeaseObservation, error) {
	const op = "observe"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	st, t, err := s.openManaged(ctx, op, trial)
	if err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	defer st.unlock()
	return t.Lease, nil
}

// newParams returns the parameters not set on t yet. stageParams has
// checked that the others repeat their value.
func newParams(t *jtrial, ps []lifecycle.Param) []jParam {
	var out []jParam
	for _, p := range ps {
		if _, ok := t.Params[p.Name]; !ok {
			out = append(out, toJParam(p))
		}
	}
	return out
}

func checkParamsUTF8(ps []lifecycle.Param) error {
	for _, p := range ps {
		if err := checkUTF8JSON("distribution of "+p.Name, p.Distribution); err != nil {
			return err
		}
	}
	return nil
}

// Claim implements [lifecycle.Storage]: the trial run's lease is acquired (a new
// epoch, always) and TrialClaimed written under it.
func (s *Storage) Claim(ctx context.Context, req lifecycle.ClaimRequest) (lifecycle.TrialOwnerToken, error) {
	const op = "claim"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.TrialOwnerToken{}, model.WithOp(op, err)
	}
	at, err := formatTime(req.HeartbeatAt)
	if err == nil {
		err = checkParamsUTF8(req.Params)
	}
	if err != nil {
		return lifecycle.TrialOwnerToken{}, model.WithOp(op, err)
	}
	st, t, err := s.openManaged(ctx, op, req.Trial)
	if err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	defer st.unlock()
	v := st.v
	if s := t.Lease.State; s != lifecycle.TrialWaiting && s != lifecycle.TrialPaused {
		return lifecycle.TrialOwnerToken{}, lifecycle.NewError(lifecycle.KindLeaseLost, op, "trial %q is %s, not claimable", t.ID, s)
	}
	var w model.StagedWrites
	if err := model.StageParams(op, &w, &t.Trial, req.Params); err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	if err := model.StageBlobs(op, &w, &v.Study, &t.Trial, req.States, nil, true); err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	a, err := v.trialAppend(t, RecordTrialClaimed, fTrialClaimed{
		Owner: req.Owner, HeartbeatAt: at, Params: newParams(t, req.Params), States: toJBlobs(req.States, lifecycle.ScopeTrial),
	})
	if err != nil {
		return lifecycle.TrialOwnerToken{}, lifecycle.StorageError(op, err)
	}
	if _, err := precheck(op, t.head, maxEpoch, []store.Append{a}, 0); err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	epoch, err := s.takeLease(ctx, t.run, req.Owner)
	if err != nil {
		// No record was written; a lease this left behind is an orphan
		// the next claim takes over.
		return lifecycle.TrialOwnerToken{}, lifecycle.StorageError(op, err)
	}
	if err := s.appendTrial(ctx, op, st, t, epoch, []store.Append{a}); err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	return lifecycle.TrialOwnerToken{Trial: t.ID, Owner: req.Owner, Epoch: t.Lease.Epoch}, nil
}

// Renew implements [lifecycle.Storage]: one TrialHeartbeat under the owner's epoch.
// Each renewal is a record because the heartbeat sequence is part of the
// observation FailStale compares.
func (s *Storage) Renew(ctx context.Context, req lifecycle.RenewRequest) (lifecycle.LeaseObservation, error) {
	const op = "renew"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.LeaseObservation{}, model.WithOp(op, err)
	}
	at, err := formatTime(req.HeartbeatAt)
	if err != nil {
		return lifecycle.LeaseObservation{}, model.WithOp(op, err)
	}
	st, t, err := s.openOwned(ctx, op, req.Owner)
	if err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	defer st.unlock()
	a, err := st.v.trialAppend(t, RecordTrialHeartbeat, fTrialHeartbeat{HeartbeatSeq: t.Lease.HeartbeatSeq + 1, HeartbeatAt: at})
	if err != nil {
		return lifecycle.LeaseObservation{}, lifecycle.StorageError(op, err)
	}
	if err := s.trialWrite(ctx, op, st, t, store.Epoch(t.Lease.Epoch), []store.Append{a}); err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	return t.Lease, nil
}

// FailStale implements [lifecycle.Storage]. It reads no clock. The winner commits
// TrialTerminal (cause stale, with the outbox intent) in the study run;
// then the owner's lease is released and a fresh epoch acquired, which
// fences the owner in the journal too, before the trial run's mirror and
// the seal.
func (s *Storage) FailStale(ctx context.Context, req lifecycle.FailStaleRequest) (bool, error) {
	const op = "fail_stale"
	if err := model.Begin(ctx, op); err != nil {
		return false, err
	}
	if err := req.Validate(); err != nil {
		return false, model.WithOp(op, err)
	}
	if err := checkUTF8JSON("intent data", req.Intent.Data); err != nil {
		return false, model.WithOp(op, err)
	}
	st, t, err := s.openManaged(ctx, op, req.Observed.Trial)
	if err != nil {
		return false, err
	}
	defer st.unlock()
	if t.Lease.State != lifecycle.TrialRunning || !t.Lease.Equal(req.Observed) {
		return false, nil
	}
	err = s.transition(ctx, op, st, RecordTrialTerminal, fStudyTerminal{
		Trial: t.ID, OwnerEpoch: t.Lease.Epoch, State: lifecycle.TrialFailed, Cause: endStale,
		Intent: toJIntent(req.Intent), GraceNS: int64(req.Grace), TerminalSeq: uint64(len(st.v.Outbox)) + 1,
	})
	return err == nil, err
}

// FencedMutate implements [lifecycle.Storage].
func (s *Storage) FencedMutate(ctx context.Context, req lifecycle.FencedMutationRequest) error {
	return s.mutate(ctx, "fenced_mutate", nil, req)
}

// MutateOwned implements [lifecycle.Storage].
func (s *Storage) MutateOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.FencedMutationRequest) error {
	return s.mutate(ctx, "mutate_owned", &owner, req)
}

// mutate writes TrialMutated in the trial run; a mutation that replaces
// study-scope state is a two-run transition, committed by TrialMutated in
// the study run and mirrored in the trial run.
func (s *Storage) mutate(ctx context.Context, op string, owner *lifecycle.FinalizationToken, req lifecycle.FencedMutationRequest) error {
	if err := model.Begin(ctx, op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return model.WithOp(op, err)
	}
	if err := checkParamsUTF8(req.Params); err != nil {
		return model.WithOp(op, err)
	}
	for k, val := range req.Attrs {
		if err := checkUTF8JSON("attribute "+k, val); err != nil {
			return model.WithOp(op, err)
		}
	}
	st, t, err := s.openOwned(ctx, op, req.Owner)
	if err != nil {
		return err
	}
	defer st.unlock()
	v := st.v
	var fence uint64
	if owner != nil {
		if err := model.CheckFinalizer(op, &v.Study, *owner); err != nil {
			return err
		}
		fence = owner.Fence
	}
	var w model.StagedWrites
	if err := model.StageParams(op, &w, &t.Trial, req.Params); err != nil {
		return err
	}
	m := jMutation{Params: newParams(t, req.Params), States: toJBlobs(req.States, lifecycle.ScopeTrial), Pause: req.Pause}
	for _, iv := range req.Intermediate {
		if old, ok := t.Inter[iv.Step]; ok {
			if old != iv.Value {
				return lifecycle.NewError(lifecycle.KindConflict, op, "step %d already reported a different value", iv.Step)
			}
			continue
		}
		m.Intermediate = append(m.Intermediate, jStep{Step: iv.Step, Value: iv.Value})
	}
	for k, val := range req.Attrs {
		if m.Attrs == nil {
			m.Attrs = map[string]string{}
		}
		m.Attrs[k] = string(model.CompactJSON(val))
	}
	if err := model.StageBlobs(op, &w, &v.Study, &t.Trial, req.States, owner, true); err != nil {
		return err
	}
	if study := toJBlobs(req.States, lifecycle.ScopeStudy); len(study) > 0 {
		return s.transition(ctx, op, st, RecordTrialMutated, fStudyMutated{
			Trial: t.ID, OwnerEpoch: t.Lease.Epoch, jMutation: m, StudyStates: study, FinalizerFence: fence,
		})
	}
	if len(m.Params)+len(m.Intermediate)+len(m.Attrs)+len(m.States) == 0 && !m.Pause {
		return nil // nothing changes; the fence check was the whole operation
	}
	epoch := store.Epoch(t.Lease.Epoch)
	a, err := v.trialAppend(t, RecordTrialMutated, fTrialMutated{jMutation: m, FinalizerFence: fence})
	if err != nil {
		return lifecycle.StorageError(op, err)
	}
	if err := s.trialWrite(ctx, op, st, t, epoch, []store.Append{a}); err != nil {
		return err
	}
	if req.Pause {
		// The pause is committed; an unreleased lease of a paused trial is
		// taken over by its next claim.
		_ = s.j.ReleaseLease(context.WithoutCancel(ctx), t.run, epoch)
	}
	return nil
}

// Terminal implements [lifecycle.Storage].
func (s *Storage) Terminal(ctx context.Context, req lifecycle.TerminalRequest) error {
	_, err := s.terminal(ctx, "terminal", nil, req, nil)
	return err
}

// TerminalWithIntent implements [lifecycle.Storage]: the terminal outcome and the
// outbox record are one study run record, the commit point of both.
func (s *Storage) TerminalWithIntent(ctx context.Context, req lifecycle.TerminalRequest, intent lifecycle.FinalizationIntent) (lifecycle.OutboxKey, error) {
	return s.terminal(ctx, "terminal_with_intent", nil, req, &intent)
}

// TerminalWithIntentOwned implements [lifecycle.Storage].
func (s *Storage) TerminalWithIntentOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.TerminalRequest, intent lifecycle.FinalizationIntent) (lifecycle.OutboxKey, error) {
	return s.terminal(ctx, "terminal_with_intent_owned", &owner, req, &intent)
}

func (s *Storage) terminal(ctx context.Context, op string, owner *lifecycle.FinalizationToken, req lifecycle.TerminalRequest, intent *lifecycle.FinalizationIntent) (lifecycle.OutboxKey, error) {
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.OutboxKey{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.OutboxKey{}, model.WithOp(op, err)
	}
	if intent != nil {
		if err := intent.Validate(); err != nil {
			return lifecycle.OutboxKey{}, model.WithOp(op, err)
		}
		if err := checkUTF8JSON("intent data", intent.Data); err != nil {
			return lifecycle.OutboxKey{}, model.WithOp(op, err)
		}
	}
	st, t, err := s.openOwned(ctx, op, req.Owner)
	if err != nil {
		return lifecycle.OutboxKey{}, err
	}
	defer st.unlock()
	v := st.v
	f := fStudyTerminal{Trial: t.ID, OwnerEpoch: t.Lease.Epoch, State: req.State, Cause: endTerminal}
	if owner != nil {
		if err := model.CheckFinalizer(op, &v.Study, *owner); err != nil {
			return lifecycle.OutboxKey{}, err
		}
		f.FinalizerFence = owner.Fence
	}
	if err := v.Spec.CheckValues(req.State, req.Values); err != nil {
		return lifecycle.OutboxKey{}, model.WithOp(op, err)
	}
	var w model.StagedWrites
	if err := model.StageBlobs(op, &w, &v.Study, &t.Trial, req.States, owner, true); err != nil {
		return lifecycle.OutboxKey{}, err
	}
	if len(req.Values) > 0 {
		f.Values = slices.Clone(req.Values)
	}
	f.States, f.StudyStates = toJBlobs(req.States, lifecycle.ScopeTrial), toJBlobs(req.States, lifecycle.ScopeStudy)
	key := lifecycle.OutboxKey{Trial: t.ID, Epoch: t.Lease.Epoch}
	if intent != nil {
		f.Intent, f.TerminalSeq = toJIntent(*intent), uint64(len(v.Outbox))+1
	}
	if err := s.transition(ctx, op, st, RecordTrialTerminal, f); err != nil {
		return lifecycle.OutboxKey{}, err
	}
	if intent == nil {
		return lifecycle.OutboxKey{}, nil
	}
	return key, nil
}
