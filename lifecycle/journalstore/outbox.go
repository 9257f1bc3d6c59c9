package journalstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// openOutbox returns the study of an outbox record's trial, locked. An
// unknown trial is an unknown record.
func (s *Storage) openOutbox(ctx context.Context, op string, key lifecycle.OutboxKey) (*jstudy, *lifecycle.OutboxRecord, error) {
	st, _, err := s.openTrial(ctx, op, key.Trial)
	if lifecycle.KindOf(err) == lifecycle.KindNotFound {
		return nil, nil, lifecycle.NewError(lifecycle.KindNotFound, op, "outbox record %v", key)
	}
	if err != nil {
		return nil, nil, err
	}
	rec := st.v.records[key]
	if rec == nil {
		st.unlock()
		return nil, nil, lifecycle.NewError(lifecycle.KindNotFound, op, "outbox record %v", key)
	}
	return st, rec, nil
}

// AdvanceOutbox implements [lifecycle.Storage].
func (s *Storage) AdvanceOutbox(ctx context.Context, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	return s.advance(ctx, "advance_outbox", nil, req)
}

// AdvanceOutboxOwned implements [lifecycle.Storage].
func (s *Storage) AdvanceOutboxOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	return s.advance(ctx, "advance_outbox_owned", &owner, req)
}

// advance writes OutboxAdvanced in the study run. Trial-scope state it
// carries belongs to a trial whose run is sealed, so it lives there too.
func (s *Storage) advance(ctx context.Context, op string, owner *lifecycle.FinalizationToken, req lifecycle.OutboxAdvanceRequest) (lifecycle.OutboxPhase, error) {
	if err := model.Begin(ctx, op); err != nil {
		return "", err
	}
	if err := req.Validate(); err != nil {
		return "", model.WithOp(op, err)
	}
	for _, e := range req.Effects {
		if err := checkEffectUTF8(e); err != nil {
			return "", model.WithOp(op, err)
		}
	}
	st, rec, err := s.openOutbox(ctx, op, req.Key)
	if err != nil {
		return "", err
	}
	defer st.unlock()
	v := st.v
	t := v.byID[req.Key.Trial]
	// Advancing is finalization work whether or not it carries state: a
	// non-owner moving the cursor under an active owner would turn the
	// owner's next write into a silently ignored replay.
	if err := model.CheckStudyWriter(op, &v.Study, owner); err != nil {
		return "", err
	}
	cur, next := rec.Phase, req.Phase
	if next.Rank() <= cur.Rank() {
		if next == lifecycle.PhaseEffects {
			for _, e := range req.Effects {
				i := slices.IndexFunc(rec.Effects, func(r lifecycle.OutboxEffect) bool { return r.Name == e.Name })
				if i < 0 || !sameRecordedEffect(rec.Effects[i], e) {
					return "", lifecycle.NewError(lifecycle.KindConflict, op, "effect %q replayed with a different payload", e.Name)
				}
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
	if err := model.StageBlobs(op, &w, &v.Study, &t.Trial, req.States, owner, false); err != nil {
		return "", err
	}
	f := fOutboxAdvanced{Trial: req.Key.Trial, OwnerEpoch: req.Key.Epoch, Phase: next}
	for _, b := range req.States {
		f.States = append(f.States, toJBlob(b))
	}
	if owner != nil {
		f.FinalizerFence = owner.Fence
	}
	if next == lifecycle.PhaseEffects {
		effects := slices.Clone(req.Effects)
		slices.SortFunc(effects, func(a, b lifecycle.OutboxEffect) int { return cmp.Compare(a.Name, b.Name) })
		for _, e := range effects {
			f.Effects = append(f.Effects, toJEffect(e))
		}
	}
	if err := s.transition(ctx, op, st, RecordOutboxAdvanced, f); err != nil {
		return "", err
	}
	return next, nil
}

func checkEffectUTF8(e lifecycle.OutboxEffect) error {
	if err := checkUTF8JSON("payload of effect "+e.Name, e.Payload); err != nil {
		return err
	}
	if e.Replacement != nil {
		return checkParamsUTF8(e.Replacement.Params)
	}
	return nil
}

// sameRecordedEffect reports whether e, recorded, would be the recorded
// effect: both are compared in the canonical form a record holds them in.
func sameRecordedEffect(recorded, e lifecycle.OutboxEffect) bool {
	a, errA := canonicalEffect(recorded)
	b, errB := canonicalEffect(e)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

func canonicalEffect(e lifecycle.OutboxEffect) ([]byte, error) {
	b, err := json.Marshal(toJEffect(e))
	if err != nil {
		return nil, err
	}
	return canon.Canonicalize(b)
}

// GetOutbox implements [lifecycle.Storage].
func (s *Storage) GetOutbox(ctx context.Context, key lifecycle.OutboxKey) (lifecycle.OutboxRecord, bool, error) {
	const op = "get_outbox"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.OutboxRecord{}, false, err
	}
	st, rec, err := s.openOutbox(ctx, op, key)
	if lifecycle.KindOf(err) == lifecycle.KindNotFound {
		return lifecycle.OutboxRecord{}, false, nil
	}
	if err != nil {
		return lifecycle.OutboxRecord{}, false, err
	}
	defer st.unlock()
	return model.CloneRecord(*rec), true, nil
}

// ListOutbox implements [lifecycle.Storage]: every study of the journal, each read
// under its own serialization, so the list is not one snapshot of studies
// that change while it is read.
func (s *Storage) ListOutbox(ctx context.Context) ([]lifecycle.OutboxRecord, error) {
	const op = "list_outbox"
	if s.rows != nil {
		return s.listOutboxRows(ctx, op)
	}
	ids, err := s.Studies(ctx)
	if err != nil {
		return nil, model.WithOp(op, err)
	}
	out := []lifecycle.OutboxRecord{}
	for _, id := range ids {
		st, err := s.openStudy(ctx, op, id)
		if lifecycle.KindOf(err) == lifecycle.KindNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, key := range st.v.Outbox {
			out = append(out, model.CloneRecord(*st.v.records[key]))
		}
		st.unlock()
	}
	slices.SortFunc(out, func(a, b lifecycle.OutboxRecord) int { return a.Key.Compare(b.Key) })
	return out, nil
}

// ListOutboxPage implements [lifecycle.Storage]. On a store with derived rows
// (store/sqlite, store/postgres) a page is one range read of the study's
// outbox rows, after one read of its summary row: nothing else of the
// study is read, and no view is built (spec/lifecycle.md 14.9). A study
// whose rows are behind its journal (written by an older runseal) has them
// rebuilt first, once. On another store the page is read from the study's
// view.
func (s *Storage) ListOutboxPage(ctx context.Context, req lifecycle.OutboxPageRequest) (lifecycle.OutboxPage, error) {
	const op = "list_outbox_page"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.OutboxPage{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.OutboxPage{}, model.WithOp(op, err)
	}
	if s.rows != nil {
		if s.closed.Load() {
			return lifecycle.OutboxPage{}, lifecycle.StorageError(op, ErrClosed)
		}
		row, err := s.currentRow(ctx, op, req.Study)
		if err != nil {
			return lifecycle.OutboxPage{}, err
		}
		return s.outboxPage(ctx, op, req, row.Outbox)
	}
	st, err := s.openStudy(ctx, op, req.Study)
	if err != nil {
		return lifecycle.OutboxPage{}, err
	}
	defer st.unlock()
	return model.OutboxPage(op, &st.v.Study, func(k lifecycle.OutboxKey) *lifecycle.OutboxRecord { return st.v.records[k] }, req)
}

// CompleteOutboxEffect implements [lifecycle.Storage]: EffectCompleted in the study
// run, once; a repeat writes nothing.
func (s *Storage) CompleteOutboxEffect(ctx context.Context, req lifecycle.OutboxEffectCompletion) error {
	const op = "complete_outbox_effect"
	if err := model.Begin(ctx, op); err != nil {
		return err
	}
	st, rec, e, err := s.openEffect(ctx, op, req.Effect)
	if err != nil {
		return err
	}
	defer st.unlock()
	if e.Kind != lifecycle.EffectExternal {
		return lifecycle.NewError(lifecycle.KindConflict, op, "effect %q is a %s effect, completed by the store, not acknowledged", e.Name, e.Kind)
	}
	if model.Completion(rec, e.Name) != nil {
		return nil
	}
	return s.transition(ctx, op, st, RecordEffectCompleted, fEffectCompleted{Trial: rec.Key.Trial, OwnerEpoch: rec.Key.Epoch, Name: e.Name})
}

func (s *Storage) openEffect(ctx context.Context, op string, key lifecycle.OutboxEffectKey) (*jstudy, *lifecycle.OutboxRecord, lifecycle.OutboxEffect, error) {
	st, rec, err := s.openOutbox(ctx, op, key.Outbox)
	if err != nil {
		return nil, nil, lifecycle.OutboxEffect{}, err
	}
	i := slices.IndexFunc(rec.Effects, func(e lifecycle.OutboxEffect) bool { return e.Name == key.Name })
	if i < 0 {
		st.unlock()
		return nil, nil, lifecycle.OutboxEffect{}, lifecycle.NewError(lifecycle.KindNotFound, op, "effect %q of %v", key.Name, key.Outbox)
	}
	return st, rec, rec.Effects[i], nil
}

// CreateReplacement implements [lifecycle.Storage]: ReplacementCreated in the study
// run completes the effect and, when the budget allows, reserves the new
// trial, whose run opens with its mirror. A replay writes nothing.
func (s *Storage) CreateReplacement(ctx context.Context, effect lifecycle.OutboxEffectKey) (lifecycle.ReplacementOutcome, error) {
	const op = "create_replacement"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.ReplacementOutcome{}, err
	}
	st, rec, e, err := s.openEffect(ctx, op, effect)
	if err != nil {
		return lifecycle.ReplacementOutcome{}, err
	}
	defer st.unlock()
	if e.Kind != lifecycle.EffectReplacement {
		return lifecycle.ReplacementOutcome{}, lifecycle.NewError(lifecycle.KindConflict, op, "effect %q is a %s effect, not a replacement", e.Name, e.Kind)
	}
	if c := model.Completion(rec, e.Name); c != nil {
		return *c.Replacement, nil
	}
	v := st.v
	f := fReplacementCreated{Trial: rec.Key.Trial, OwnerEpoch: rec.Key.Epoch, Name: e.Name, Status: lifecycle.ReplacementExhausted}
	if v.Study.Trials < e.Replacement.MaxTrials {
		f.Status, f.NewTrial, f.Number = lifecycle.ReplacementCreated, lifecycle.TrialID(store.NewRunID().String()), v.Study.Trials
		f.Params, f.States = toJParams(e.Replacement.Params), toJBlobs(e.Replacement.States, lifecycle.ScopeTrial)
	}
	if err := s.transition(ctx, op, st, RecordReplacementCreated, f); err != nil {
		return lifecycle.ReplacementOutcome{}, err
	}
	return *model.Completion(rec, e.Name).Replacement, nil
}

// PutFinalizedState implements [lifecycle.Storage]: FinalizedStatePut in the study
// run, since the trial's run is sealed. Repeating the stored blob writes
// nothing.
func (s *Storage) PutFinalizedState(ctx context.Context, req lifecycle.FinalizedStateRequest) error {
	const op = "put_finalized_state"
	if err := model.Begin(ctx, op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return model.WithOp(op, err)
	}
	st, t, err := s.openManaged(ctx, op, req.Trial)
	if err != nil {
		return err
	}
	defer st.unlock()
	if !t.Lease.State.Terminal() {
		return lifecycle.NewError(lifecycle.KindConflict, op, "trial %q is %s, not terminal", t.ID, t.Lease.State)
	}
	var w model.StagedWrites
	if err := model.StageBlobs(op, &w, &st.v.Study, &t.Trial, []lifecycle.StateBlob{req.State}, nil, false); err != nil {
		return err
	}
	if old, ok := t.States[req.State.Name]; ok && bytes.Equal(old.Data, req.State.Data) {
		return nil // kind and version are equal too: stageBlobs compared them
	}
	return s.transition(ctx, op, st, RecordFinalizedStatePut, fFinalizedStatePut{Trial: t.ID, State: toJBlob(req.State)})
}
