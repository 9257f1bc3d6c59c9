package memstore

import (
	"cmp"
	"context"
	"slices"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
)

// ObserveFinalization implements [lifecycle.Storage]. It creates nothing.
func (m *Storage) ObserveFinalization(ctx context.Context, study lifecycle.StudyID) (lifecycle.FinalizationObservation, error) {
	const op = "observe_finalization"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, study)
	if err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	return st.Fin, nil
}

// AcquireFinalization implements [lifecycle.Storage]. The comparison is the whole of
// the decision: a held claim is never judged expired.
func (m *Storage) AcquireFinalization(ctx context.Context, req lifecycle.FinalizationAcquireRequest) (lifecycle.FinalizationToken, error) {
	const op = "acquire_finalization"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.FinalizationToken{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.FinalizationToken{}, model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, req.Study)
	if err != nil {
		return lifecycle.FinalizationToken{}, err
	}
	if st.Fin != req.Observed {
		return lifecycle.FinalizationToken{}, lifecycle.NewError(lifecycle.KindConflict, op, "study %q finalization claim changed since it was observed (now fence %d, heartbeat %d, held=%t)",
			st.ID, st.Fin.Fence, st.Fin.HeartbeatSeq, st.Fin.Held)
	}
	st.Fin.Fence++
	st.Fin.Held = true
	st.Fin.Holder = req.Holder
	return lifecycle.FinalizationToken{Study: st.ID, Holder: req.Holder, Fence: st.Fin.Fence}, nil
}

// RenewFinalization implements [lifecycle.Storage].
func (m *Storage) RenewFinalization(ctx context.Context, token lifecycle.FinalizationToken) (lifecycle.FinalizationObservation, error) {
	const op = "renew_finalization"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, token.Study)
	if err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	if err := model.CheckFinalizer(op, st, token); err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	st.Fin.HeartbeatSeq++
	return st.Fin, nil
}

// ReleaseFinalization implements [lifecycle.Storage]. The fence stays.
func (m *Storage) ReleaseFinalization(ctx context.Context, token lifecycle.FinalizationToken) error {
	const op = "release_finalization"
	if err := model.Begin(ctx, op); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, token.Study)
	if err != nil {
		return err
	}
	if err := model.CheckFinalizer(op, st, token); err != nil {
		return err
	}
	st.Fin.Held = false
	st.Fin.Holder = ""
	return nil
}

// AdvanceOutbox implements [lifecycle.Storage].
func (m *Storage) AdvanceOutbox(ctx context.Context, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	return m.advance(ctx, "advance_outbox", nil, req)
}

// AdvanceOutboxOwned implements [lifecycle.Storage].
func (m *Storage) AdvanceOutboxOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	return m.advance(ctx, "advance_outbox_owned", &owner, req)
}

func (m *Storage) advance(ctx context.Context, op string, owner *lifecycle.FinalizationToken, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	if err := model.Begin(ctx, op); err != nil {
		return "", err
	}
	if err := req.Validate(); err != nil {
		return "", model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.outbox[req.Key]
	if rec == nil {
		return "", lifecycle.NewError(lifecycle.KindNotFound, op, "outbox record %v", req.Key)
	}
	t := m.trials[req.Key.Trial]
	st := t.Study
	// Advancing is finalization work whether or not it carries state: a
	// non-owner moving the cursor under an active owner would turn the
	// owner's next write into a silently ignored replay.
	if err := model.CheckStudyWriter(op, st, owner); err != nil {
		return "", err
	}
	cur, next := rec.Phase, req.Phase
	if next.Rank() <= cur.Rank() {
		if next == lifecycle.PhaseEffects {
			if err := model.CheckEffectReplay(op, rec, req.Effects); err != nil {
				return "", err
			}
		}
		return cur, nil
	}
	if next.Rank() > cur.Rank()+1 {
		return "", lifecycle.NewError(lifecycle.KindConflict, op, "outbox record %v is at %q; advancing to %q skips a phase", req.Key, cur, next)
	}
	if cur == lifecycle.PhaseEffects && len(rec.Completed) < len(rec.Effects) {
		return cur, nil
	}
	var w model.StagedWrites
	if err := model.StageBlobs(op, &w, st, t, req.States, owner, false); err != nil {
		return "", err
	}
	w.Apply()
	if next == lifecycle.PhaseEffects {
		rec.Effects = make([]lifecycle.OutboxEffect, 0, len(req.Effects))
		for _, e := range req.Effects {
			rec.Effects = append(rec.Effects, model.NormalizeEffect(e))
		}
		slices.SortFunc(rec.Effects, func(a, b lifecycle.OutboxEffect) int { return cmp.Compare(a.Name, b.Name) })
	}
	rec.Phase = next
	return next, nil
}

// GetOutbox implements [lifecycle.Storage].
func (m *Storage) GetOutbox(ctx context.Context, key lifecycle.OutboxKey) (lifecycle.OutboxRecord, bool, error) {
	const op = "get_outbox"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.OutboxRecord{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.outbox[key]
	if rec == nil {
		return lifecycle.OutboxRecord{}, false, nil
	}
	return model.CloneRecord(*rec), true, nil
}

// ListOutbox implements [lifecycle.Storage].
func (m *Storage) ListOutbox(ctx context.Context) ([]lifecycle.OutboxRecord, error) {
	const op = "list_outbox"
	if err := model.Begin(ctx, op); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]lifecycle.OutboxRecord, 0, len(m.outbox))
	for _, rec := range m.outbox {
		out = append(out, model.CloneRecord(*rec))
	}
	slices.SortFunc(out, func(a, b lifecycle.OutboxRecord) int { return a.Key.Compare(b.Key) })
	return out, nil
}

// ListOutboxPage implements [lifecycle.Storage]. It reads only the records it
// returns plus one, never the study's whole history.
func (m *Storage) ListOutboxPage(ctx context.Context, req lifecycle.OutboxPageRequest) (lifecycle.OutboxPage, error) {
	const op = "list_outbox_page"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.OutboxPage{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.OutboxPage{}, model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, req.Study)
	if err != nil {
		return lifecycle.OutboxPage{}, err
	}
	return model.OutboxPage(op, st, func(k lifecycle.OutboxKey) *lifecycle.OutboxRecord { return m.outbox[k] }, req)
}

// CompleteOutboxEffect implements [lifecycle.Storage].
func (m *Storage) CompleteOutboxEffect(ctx context.Context, req lifecycle.OutboxEffectCompletion) error {
	const op = "complete_outbox_effect"
	if err := model.Begin(ctx, op); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, e, err := m.effect(op, req.Effect)
	if err != nil {
		return err
	}
	if e.Kind != lifecycle.EffectExternal {
		return lifecycle.NewError(lifecycle.KindConflict, op, "effect %q is a %s effect, completed by the store, not acknowledged", e.Name, e.Kind)
	}
	if model.Completion(rec, e.Name) == nil {
		model.AddCompletion(rec, lifecycle.EffectCompletion{Name: e.Name})
	}
	return nil
}

func (m *Storage) effect(op string, key lifecycle.OutboxEffectKey) (*lifecycle.OutboxRecord, lifecycle.OutboxEffect, error) {
	rec := m.outbox[key.Outbox]
	if rec == nil {
		return nil, lifecycle.OutboxEffect{}, lifecycle.NewError(lifecycle.KindNotFound, op, "outbox record %v", key.Outbox)
	}
	i := slices.IndexFunc(rec.Effects, func(e lifecycle.OutboxEffect) bool { return e.Name == key.Name })
	if i < 0 {
		return nil, lifecycle.OutboxEffect{}, lifecycle.NewError(lifecycle.KindNotFound, op, "effect %q of %v", key.Name, key.Outbox)
	}
	return rec, rec.Effects[i], nil
}

// CreateReplacement implements [lifecycle.Storage].
func (m *Storage) CreateReplacement(ctx context.Context, effect lifecycle.OutboxEffectKey) (lifecycle.ReplacementOutcome, error) {
	const op = "create_replacement"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.ReplacementOutcome{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, e, err := m.effect(op, effect)
	if err != nil {
		return lifecycle.ReplacementOutcome{}, err
	}
	if e.Kind != lifecycle.EffectReplacement {
		return lifecycle.ReplacementOutcome{}, lifecycle.NewError(lifecycle.KindConflict, op, "effect %q is a %s effect, not a replacement", e.Name, e.Kind)
	}
	if c := model.Completion(rec, e.Name); c != nil {
		return *c.Replacement, nil
	}
	st := m.studies[rec.Study]
	spec := e.Replacement
	if st.Trials >= spec.MaxTrials {
		out := lifecycle.ReplacementOutcome{Status: lifecycle.ReplacementExhausted}
		model.AddCompletion(rec, lifecycle.EffectCompletion{Name: e.Name, Replacement: &out})
		return out, nil
	}
	// The new trial has no state yet, so the kind/version comparison in
	// stageBlobs cannot fail here; it runs anyway so that the rule has one
	// implementation.
	t := model.NewTrial(st, true)
	var w model.StagedWrites
	if err := model.StageParams(op, &w, t, spec.Params); err != nil {
		return lifecycle.ReplacementOutcome{}, err
	}
	if err := model.StageBlobs(op, &w, st, t, spec.States, nil, false); err != nil {
		return lifecycle.ReplacementOutcome{}, err
	}
	m.register(t)
	w.Apply()
	t.ReplacementOf = &effect
	out := lifecycle.ReplacementOutcome{Status: lifecycle.ReplacementCreated, Trial: t.ID, Number: t.Number}
	model.AddCompletion(rec, lifecycle.EffectCompletion{Name: e.Name, Replacement: &out})
	return out, nil
}

// PutFinalizedState implements [lifecycle.Storage].
func (m *Storage) PutFinalizedState(ctx context.Context, req lifecycle.FinalizedStateRequest) error {
	const op = "put_finalized_state"
	if err := model.Begin(ctx, op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, req.Trial)
	if err != nil {
		return err
	}
	if !t.Lease.State.Terminal() {
		return lifecycle.NewError(lifecycle.KindConflict, op, "trial %q is %s, not terminal", t.ID, t.Lease.State)
	}
	var w model.StagedWrites
	if err := model.StageBlobs(op, &w, t.Study, t, []lifecycle.StateBlob{req.State}, nil, false); err != nil {
		return err
	}
	w.Apply()
	return nil
}
