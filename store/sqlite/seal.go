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
	if err := store.CheckSeal(epoch, outcome); err != nil {
		return store.Digest{}, err
	}
	var leaf store.Digest
	err := s.write(ctx, func(tx *sql.Tx) error {
		bg := context.Background()
		size, err := s.logSize(bg, tx)
		if err != nil {
			return err
		}
		exec := func(ctx context.Context, q string, args ...any) (sql.Result, error) {
			return s.txExec(ctx, tx, q, args...)
		}
		st, err := s.loadRun(bg, tx, run)
		if err != nil {
			return err
		}
		var fence error
		if st.exists {
			fence = s.checkFence(bg, tx, run, epoch)
		}
		l, fresh, err := s.sealRun(bg, tx, exec, run, epoch, outcome, size, st, fence)
		if err != nil || !fresh {
			leaf = l
			return err
		}
		if err := s.appendLeaf(bg, tx, size, l); err != nil {
			return err
		}
		if err := s.setLogSize(bg, tx, size+1); err != nil {
			return err
		}
		leaf = l
		return nil
	})
	return leaf, err
}

// sealRun decides one seal inside the writer's transaction, from the
// run's state st and the fence's answer (both read by the caller in that
// transaction), and, if the run was not sealed yet, marks it sealed at
// index; the caller adds its leaf to the tree and grows the log. fresh is
// false for a re-seal (first seal wins), which writes nothing. A run whose
// row is open but whose head the log already holds is refused as edited
// (refuseLogged), not given a second leaf. q reads and exec runs the
// update, in the writer's transaction.
func (s *Store) sealRun(ctx context.Context, q querier, exec execFunc, run store.RunID, epoch store.Epoch, outcome string, index uint64, st runState, fence error) (leaf store.Digest, fresh bool, err error) {
	if !st.exists {
		return leaf, false, &store.NotFoundError{What: "run " + run.String()}
	}
	if fence != nil {
		return leaf, false, fence
	}
	if st.sealedOutcome.Valid {
		return store.Digest(st.leaf), false, nil // first seal wins
	}
	if err := s.refuseLogged(ctx, q, run, st.head); err != nil {
		return leaf, false, err
	}
	if !st.outcome.Valid || st.outcome.String != outcome {
		latest := "none"
		if st.outcome.Valid {
			latest = fmt.Sprintf("%q", st.outcome.String)
		}
		return leaf, false, &store.InvalidArgumentError{Field: "outcome", Detail: fmt.Sprintf("run %s's latest conclusion is %s; append a RunConcluded with outcome %q before sealing", run, latest, outcome)}
	}
	_, err = exec(ctx, qSealRun, outcome, s.now().UnixNano(), int64(index), st.head.Hash[:], s.tenant, run.String())
	if err != nil {
		return leaf, false, fmt.Errorf("seal run %s: %w", run, err)
	}
	return st.head.Hash, true, nil
}

// execFunc runs a statement in the writer's transaction.
type execFunc = func(ctx context.Context, query string, args ...any) (sql.Result, error)

// qSealRun marks a run sealed at its log index.
const qSealRun = `UPDATE runs SET sealed_outcome=?, sealed_at=?, log_index=?, leaf=? WHERE tenant=? AND run=?`

// setLogSize records the tenant's log size.
func (s *Store) setLogSize(ctx context.Context, tx *sql.Tx, size uint64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO logs(tenant, size) VALUES(?, ?) ON CONFLICT(tenant) DO UPDATE SET size=excluded.size`, s.tenant, int64(size)); err != nil {
		return fmt.Errorf("grow log: %w", err)
	}
	return nil
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
