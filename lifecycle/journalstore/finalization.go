package journalstore

import (
	"context"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
)

// ObserveFinalization implements [lifecycle.Storage]. It writes nothing.
func (s *Storage) ObserveFinalization(ctx context.Context, study lifecycle.StudyID) (lifecycle.FinalizationObservation, error) {
	const op = "observe_finalization"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	st, err := s.openStudy(ctx, op, study)
	if err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	defer st.unlock()
	return st.v.Fin, nil
}

// AcquireFinalization implements [lifecycle.Storage]: FinalizationAcquired in the
// study run. The comparison is the whole decision; no clock is read.
func (s *Storage) AcquireFinalization(ctx context.Context, req lifecycle.FinalizationAcquireRequest) (lifecycle.FinalizationToken, error) {
	const op = "acquire_finalization"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.FinalizationToken{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.FinalizationToken{}, model.WithOp(op, err)
	}
	st, err := s.openStudy(ctx, op, req.Study)
	if err != nil {
		return lifecycle.FinalizationToken{}, err
	}
	defer st.unlock()
	fin := st.v.Fin
	if fin != req.Observed {
		return lifecycle.FinalizationToken{}, lifecycle.NewError(lifecycle.KindConflict, op, "study %q finalization claim changed since it was observed (now fence %d, heartbeat %d, held=%t)",
			st.id, fin.Fence, fin.HeartbeatSeq, fin.Held)
	}
	if err := s.transition(ctx, op, st, RecordFinalizationAcquired, fFinalizationAcquired{Holder: req.Holder, Fence: fin.Fence + 1}); err != nil {
		return lifecycle.FinalizationToken{}, err
	}
	return lifecycle.FinalizationToken{Study: st.id, Holder: req.Holder, Fence: st.v.Fin.Fence}, nil
}

// RenewFinalization implements [lifecycle.Storage].
func (s *Storage) RenewFinalization(ctx context.Context, token lifecycle.FinalizationToken) (lifecycle.FinalizationObservation, error) {
	const op = "renew_finalization"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	st, err := s.openStudy(ctx, op, token.Study)
	if err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	defer st.unlock()
	if err := model.CheckFinalizer(op, &st.v.Study, token); err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	if err := s.transition(ctx, op, st, RecordFinalizationRenewed, fFinalizationRenewed{Fence: token.Fence, HeartbeatSeq: st.v.Fin.HeartbeatSeq + 1}); err != nil {
		return lifecycle.FinalizationObservation{}, err
	}
	return st.v.Fin, nil
}

// ReleaseFinalization implements [lifecycle.Storage]. The fence stays.
func (s *Storage) ReleaseFinalization(ctx context.Context, token lifecycle.FinalizationToken) error {
	const op = "release_finalization"
	if err := model.Begin(ctx, op); err != nil {
		return err
	}
	st, err := s.openStudy(ctx, op, token.Study)
	if err != nil {
		return err
	}
	defer st.unlock()
	if err := model.CheckFinalizer(op, &st.v.Study, token); err != nil {
		return err
	}
	return s.transition(ctx, op, st, RecordFinalizationReleased, fFinalizationReleased{Fence: token.Fence})
}
