package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The statements every append runs. Parsing and planning them cost more CPU
// than executing them, and the single writer is CPU-bound under concurrency,
// so they are prepared once on the writer connection.
const (
	qSavepoint    = `SAVEPOINT member`
	qRelease      = `RELEASE member`
	qLoadRun      = `SELECT head_seq, head_hash, outcome, sealed_outcome, leaf, log_index FROM runs WHERE tenant=? AND run=?`
	qFence        = `SELECT epoch FROM leases WHERE tenant=? AND run=?`
	qEffect       = `SELECT count(*) FROM records WHERE tenant=? AND run=? AND kind='EffectStarted' AND effect_key=?`
	qInsertRecord = `INSERT INTO records(tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw) VALUES(?,?,?,?,?,?,?,?,?)`
	qUpsertRun    = `INSERT INTO runs(tenant, run, head_seq, head_hash, active_at, source, outcome, outcome_ord, wait_awaiting, wait_event, wait_until)
		VALUES(?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(tenant, run) DO UPDATE SET head_seq=excluded.head_seq, head_hash=excluded.head_hash, active_at=excluded.active_at,
			source=coalesce(excluded.source, runs.source),
			outcome=coalesce(excluded.outcome, runs.outcome), outcome_ord=coalesce(excluded.outcome_ord, runs.outcome_ord),
			wait_awaiting=excluded.wait_awaiting, wait_event=excluded.wait_event, wait_until=excluded.wait_until`
)

var hotQueries = []string{qSavepoint, qRelease, qLoadRun, qFence, qEffect, qInsertRecord, qUpsertRun}

// prepareHot prepares hotQueries on the writer connection. It must run
// before the writer starts: the writer's transaction holds the only
// connection, and a Prepare on the pool would wait for it forever.
func (s *Store) prepareHot(ctx context.Context) error {
	s.hot = make(map[string]*sql.Stmt, len(hotQueries))
	for _, q := range hotQueries {
		st, err := s.wdb.PrepareContext(ctx, q)
		if err != nil {
			s.closeHot()
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		s.hot[q] = st
	}
	return nil
}

func (s *Store) closeHot() error {
	var errs []error
	for _, st := range s.hot {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// hotStmt returns query's prepared statement bound to tx, or nil. Only the
// writer's own transaction may use one: a statement prepared on the writer
// connection fails in a reader's transaction.
func (s *Store) hotStmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	st := s.hot[query]
	if st == nil || s.wtx.Load() != tx {
		return nil
	}
	return tx.StmtContext(ctx, st)
}

// txExec runs query in tx, through its prepared statement when it has one.
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.hotStmt(ctx, tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// queryRow runs query on q, through its prepared statement when q is the
// writer's transaction and the query has one.
func (s *Store) queryRow(ctx context.Context, q querier, query string, args ...any) *sql.Row {
	if tx, ok := q.(*sql.Tx); ok {
		if st := s.hotStmt(ctx, tx, query); st != nil {
			return st.QueryRowContext(ctx, args...)
		}
	}
	return q.QueryRowContext(ctx, query, args...)
}
