package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/runseal/runseal/store"
)

// Seal implements store.Journal. The run must exist, its latest conclusion
// must be the sealing outcome asked for (so the outcome the log commits to
// is the one the chain records), and the fence must pass.
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
	err := s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		st, err := s.loadRun(bg, tx, run)
		if err != nil {
			return err
		}
		if !st.exists {
			return &store.NotFoundError{What: "run " + run.String()}
		}
		if err := s.checkFence(bg, tx, run, epoch); err != nil {
			return err
		}
		if st.sealedOutcome.Valid {
			leaf = store.Digest(st.leaf) // first seal wins
			return nil
		}
		if !st.outcome.Valid || st.outcome.String != outcome {
			latest := "none"
			if st.outcome.Valid {
				latest = fmt.Sprintf("%q", st.outcome.String)
			}
			return &store.InvalidArgumentError{Field: "outcome", Detail: fmt.Sprintf("run %s's latest conclusion is %s; append a RunConcluded with outcome %q before sealing", run, latest, outcome)}
		}
		size, err := s.logSize(bg, tx)
		if err != nil {
			return err
		}
		if err := s.appendLeaf(bg, tx, size, st.head.Hash); err != nil {
			return err
		}
		_, err = tx.ExecContext(bg, `UPDATE runs SET sealed_outcome=?, sealed_at=?, log_index=?, leaf=? WHERE tenant=? AND run=?`,
			outcome, s.now().UnixNano(), int64(size), st.head.Hash[:], s.tenant, run.String())
		if err != nil {
			return fmt.Errorf("seal run %s: %w", run, err)
		}
		_, err = tx.ExecContext(bg, `INSERT INTO logs(tenant, size) VALUES(?, ?) ON CONFLICT(tenant) DO UPDATE SET size=excluded.size`, s.tenant, int64(size+1))
		if err != nil {
			return fmt.Errorf("grow log: %w", err)
		}
		leaf = st.head.Hash
		return nil
	})
	return leaf, err
}

func (s *Store) logSize(ctx context.Context, q querier) (uint64, error) {
	var n int64
	err := q.QueryRowContext(ctx, `SELECT size FROM logs WHERE tenant=?`, s.tenant).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read log size: %w", err)
	}
	if n < 0 {
		return 0, &store.CorruptError{Detail: "negative log size"}
	}
	return uint64(n), nil
}
