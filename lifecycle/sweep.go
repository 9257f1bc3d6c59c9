package lifecycle

import (
	"context"
	"time"
)

// FailIfStale is the sweeper's half of the clock rule. It observes trial,
// waits grace on this process's own monotonic clock (a timer, never a
// comparison of timestamps), and then asks the store to fail the trial if
// its complete lease still equals the first observation. The store's
// atomic comparison is the second observation, so an owner that renewed,
// paused, finished or was re-claimed during the wait is never failed.
//
// It returns false without waiting when the trial is not running, and
// false when the store reports the observation changed or another sweeper
// won.
func FailIfStale(ctx context.Context, s Storage, trial TrialID, grace time.Duration, intent FinalizationIntent) (bool, error) {
	const op = "fail_stale"
	if grace <= 0 {
		return false, NewError(KindInvalid, op, "grace %v is not positive", grace)
	}
	if err := intent.Validate(); err != nil {
		return false, withOp(op, err)
	}
	observed, err := s.Observe(ctx, trial)
	if err != nil {
		return false, err
	}
	if observed.State != TrialRunning {
		return false, nil
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false, StorageError(op, ctx.Err())
	case <-timer.C:
	}
	return s.FailStale(ctx, FailStaleRequest{Observed: observed, Grace: grace, Intent: intent})
}
