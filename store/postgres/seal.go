package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Seal implements store.Journal. The run must exist, its latest conclusion
// must be the sealing outcome asked for (so the outcome the log commits to
// is the one the chain records), and the fence must pass. The run's lock is
// taken before the tenant's log row, always in that order, so seals and
// appends cannot deadlock.
func (s *Store) Seal(ctx context.Context, run store.RunID, epoch store.Epoch, outcome string) (store.Digest, error) {
	if err := store.ValidateEpoch(epoch); err != nil {
		return store.Digest{}, err
	}
	if err := store.ValidateOutcome(outcome); err != nil {
		return store.Digest{}, err
	}
	if !store.IsSealingOutcome(outcome) {
		return store.Digest{}, &store.InvalidArgumentError{Field: "outcome", Detail: fmt.Sprintf("%q does not seal; only %v do, and a failed or exhausted run stays open for resume", outcome, store.SealingOutcomes)}
	}
	var leaf store.Digest
	err := s.write(ctx, func() string { return "seal run " + run.String() }, func(x *session) error {
		l, err := x.lockRun(ctx, run)
		if err != nil {
			return err
		}
		if !l.run.exists {
			return &store.NotFoundError{What: "run " + run.String()}
		}
		if err := l.fence(run, epoch); err != nil {
			return err
		}
		if l.run.sealedOutcome != nil {
			if len(l.run.leaf) != 32 {
				return &store.CorruptError{Run: run, Detail: "sealed run has no 32-byte leaf"}
			}
			leaf = store.Digest(l.run.leaf) // first seal wins
			return nil
		}
		if l.run.outcome == nil || *l.run.outcome != outcome {
			latest := "none"
			if l.run.outcome != nil {
				latest = fmt.Sprintf("%q", *l.run.outcome)
			}
			return &store.InvalidArgumentError{Field: "outcome", Detail: fmt.Sprintf("run %s's latest conclusion is %s; append a RunConcluded with outcome %q before sealing", run, latest, outcome)}
		}
		// The index is taken under the tenant's log row lock, held to
		// commit: the next seal waits for this one to commit or roll back.
		var index int64
		if err := x.conn.QueryRow(ctx, s.q.logNext, s.tenant).Scan(&index); err != nil {
			return notWritten(fmt.Errorf("take log index: %w", err))
		}
		if index < 0 {
			return &store.CorruptError{Detail: "negative log size"}
		}
		tag, err := x.conn.Exec(ctx, s.q.sealRun, s.tenant, run.String(), outcome, index, l.run.head.Hash[:])
		if err != nil {
			return notWritten(fmt.Errorf("seal: %w", err))
		}
		if tag.RowsAffected() != 1 {
			// Under the run's lock this cannot happen; if it does, the
			// leaf must not enter the log without its run.
			return notWritten(fmt.Errorf("seal of run %s matched %d rows", run, tag.RowsAffected()))
		}
		b := &pgx.Batch{}
		if err := s.appendLeaves(ctx, x, b, uint64(index), log.Hash(l.run.head.Hash)); err != nil {
			return err
		}
		if err := x.commit(ctx, b, func(_ int, err error) error { return nodeConflict(err) }); err != nil {
			return err
		}
		leaf = l.run.head.Hash
		return nil
	})
	return leaf, err
}
