package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
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
	qAdmission    = `SELECT run FROM admissions WHERE tenant=? AND key=?`
	qClaim        = `INSERT INTO admissions(tenant, key, run, claimed_at) VALUES(?,?,?,?)`
	qInsertRecord = `INSERT INTO records(tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw) VALUES(?,?,?,?,?,?,?,?,?)`
	qAdvanceHead  = `UPDATE runs SET head_seq = ?3, head_hash = ?4 WHERE tenant = ?1 AND run = ?2`
	qUpsertRun    = `INSERT INTO runs(tenant, run, head_seq, head_hash, active_at, source, outcome, outcome_ord, wait_awaiting, wait_event, wait_until)
		VALUES(?,?,?,?,?,?,?,?,?,?,?)` + upsertRunSet
)

// upsertRunSet is how an append's row of runs updates an existing one: a
// source or conclusion is kept until another replaces it; a wait is cleared
// by any progress.
const upsertRunSet = `
		ON CONFLICT(tenant, run) DO UPDATE SET head_seq=excluded.head_seq, head_hash=excluded.head_hash, active_at=excluded.active_at,
			source=coalesce(excluded.source, runs.source),
			outcome=coalesce(excluded.outcome, runs.outcome), outcome_ord=coalesce(excluded.outcome_ord, runs.outcome_ord),
			wait_awaiting=excluded.wait_awaiting, wait_event=excluded.wait_event, wait_until=excluded.wait_until`

// A batch of appends writes its rows through statements of rowsPerStmt
// rows, prepared once, and the last few rows one by one: parsing a fresh
// multi-row statement for every group costs more than it saves.
const rowsPerStmt = 16

var (
	qInsertRecords = `INSERT INTO records(tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw) VALUES ` +
		repeatRows("(?,?,?,?,?,?,?,?,?)", rowsPerStmt)
	qUpsertRuns = `INSERT INTO runs(tenant, run, head_seq, head_hash, active_at, source, outcome, outcome_ord, wait_awaiting, wait_event, wait_until) VALUES ` +
		repeatRows("(?,?,?,?,?,?,?,?,?,?,?)", rowsPerStmt) + upsertRunSet
	// qAdvanceHeads moves the heads of runs whose other columns an append
	// leaves as they are (upsertRuns): touching no column of an index, it
	// rewrites no index entry.
	qAdvanceHeads = `UPDATE runs SET head_seq = v.column3, head_hash = v.column4 FROM (VALUES ` +
		repeatRows("(?,?,?,?)", rowsPerStmt) + `) AS v WHERE runs.tenant = v.column1 AND runs.run = v.column2`
	// qMoveKnownHeads moves the heads of runs the writer remembers
	// (known.go), each only if its row still holds the remembered head
	// (column5, column6), is unsealed, is under the remembered lease
	// epoch (column7; NULL: no lease row), and the log holds no leaf of
	// the remembered head (column8, its leaf hash; see unsealed.go). The
	// caller counts the rows moved.
	qMoveKnownHeads = `UPDATE runs SET head_seq = v.column3, head_hash = v.column4 FROM (VALUES ` +
		repeatRows("(?,?,?,?,?,?,?,?)", rowsPerStmt) + `) AS v WHERE ` + moveKnownWhere
	qMoveKnownHead = `UPDATE runs SET head_seq = v.column3, head_hash = v.column4 FROM (VALUES (?,?,?,?,?,?,?,?)) AS v WHERE ` + moveKnownWhere
	// qLoadRuns reads the state and lease of the runs named in a JSON
	// array, in one statement, each row led by its run's index in the array.
	qLoadRuns = `SELECT q.key, q.value, r.head_seq, r.head_hash, r.outcome, r.sealed_outcome, l.epoch, r.active_at, r.wait_awaiting IS NOT NULL FROM json_each(?) q
		LEFT JOIN runs r ON r.tenant=? AND r.run=q.value
		LEFT JOIN leases l ON l.tenant=? AND l.run=q.value`
)

const moveKnownWhere = `runs.tenant = v.column1 AND runs.run = v.column2 AND runs.head_seq = v.column5 AND runs.head_hash = v.column6
		AND runs.sealed_outcome IS NULL AND (SELECT l.epoch FROM leases l WHERE l.tenant = v.column1 AND l.run = v.column2) IS v.column7
		AND NOT EXISTS (SELECT 1 FROM log_nodes n WHERE n.tenant = v.column1 AND n.level = 0 AND n.hash = v.column8)`

func repeatRows(row string, n int) string {
	return strings.TrimSuffix(strings.Repeat(row+",", n), ",")
}

var hotQueries = []string{qSavepoint, qRelease, qLoadRun, qFence, qEffect, qAdmission, qClaim, qInsertRecord, qUpsertRun, qInsertRecords, qUpsertRuns, qLoadRuns, qInsertKey, qInsertKeys, qMergeKeys, qClearHot, qAdvanceHead, qAdvanceHeads, qMoveKnownHead, qMoveKnownHeads, qChainEpoch, qLeafIndex}

// readQueries are the statements of the read paths every read of a run
// takes (Head, Read, ReadPage, Verify, an export's page). Their union over
// both key tables (keyedRecords) cost SQLite more to parse and plan than a
// short run's read costs to execute, so they are prepared on the read pool:
// database/sql prepares each on a pool connection the first time that
// connection runs it and keeps it there while the connection lives.
var readQueries = []string{qLoadRun, qReadRun, qScanRecords, qRunLeaves}

// stmts are statements prepared on one pool, by query.
type stmts map[string]*sql.Stmt

// prepareStmts prepares queries on db.
func prepareStmts(ctx context.Context, db *sql.DB, queries []string) (stmts, error) {
	m := make(stmts, len(queries))
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			m.close()
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		m[q] = st
	}
	return m, nil
}

func (m stmts) close() error {
	var errs []error
	for _, st := range m {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// prepareHot prepares hotQueries on the writer connection and readQueries
// on the read pool. It must run before the writer starts: the writer's
// transaction holds the only connection, and a Prepare on that pool would
// wait for it forever.
func (s *Store) prepareHot(ctx context.Context) error {
	var err error
	if s.hot, err = prepareStmts(ctx, s.wdb, hotQueries); err != nil {
		return err
	}
	if s.reads, err = prepareStmts(ctx, s.rdb, readQueries); err != nil {
		s.hot.close()
		return err
	}
	return nil
}

func (s *Store) closeHot() error { return errors.Join(s.hot.close(), s.reads.close()) }

// hotStmt returns query's prepared statement bound to tx, or nil: the
// writer's own statement in the writer's transaction, the read pool's in
// any other. A statement prepared on the writer connection must not run in
// a reader's transaction (it would be prepared again on the reader's
// connection, and a write refused there). One of the read pool's, bound to
// a transaction of another pool, fails (database/sql: "statement from
// different database used"), so every transaction but the writer's that
// reaches here must be the read pool's: today the group commit's is the
// only transaction on the writer's pool that reads through these helpers
// (it sets wtx before any member runs; migrate uses none of them).
func (s *Store) hotStmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	set := s.reads
	if s.wtx.Load() == tx {
		set = s.hot
	}
	st := set[query]
	if st == nil {
		return nil
	}
	return tx.StmtContext(ctx, st)
}

// execRows writes rows (each width values) with query1, a one-row
// statement, and queryN, the same statement of rowsPerStmt rows. It
// returns the result of the last statement.
func (s *Store) execRows(ctx context.Context, tx *sql.Tx, query1, queryN string, width int, rows []any) (sql.Result, error) {
	return s.execRowsCounted(ctx, tx, query1, queryN, width, rows, nil)
}

// execRowsCounted is execRows that adds the rows its statements changed to
// *changed, when changed is not nil.
func (s *Store) execRowsCounted(ctx context.Context, tx *sql.Tx, query1, queryN string, width int, rows []any, changed *int64) (sql.Result, error) {
	var res sql.Result
	for _, q := range []struct {
		query string
		rows  int
	}{{queryN, rowsPerStmt}, {query1, 1}} {
		if len(rows) < width*q.rows {
			continue
		}
		exec := func(args ...any) (sql.Result, error) { return tx.ExecContext(ctx, q.query, args...) }
		if st := s.hotStmt(ctx, tx, q.query); st != nil {
			exec = func(args ...any) (sql.Result, error) { return st.ExecContext(ctx, args...) }
		}
		for len(rows) >= width*q.rows {
			var err error
			if res, err = exec(rows[:width*q.rows]...); err != nil {
				return nil, err
			}
			if changed != nil {
				n, err := res.RowsAffected()
				if err != nil {
					return nil, err
				}
				*changed += n
			}
			rows = rows[width*q.rows:]
		}
	}
	return res, nil
}

// txExec runs query in tx, through its prepared statement when it has one.
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.hotStmt(ctx, tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// queryRow runs query on q, through its prepared statement when it has
// one for q: in a transaction (hotStmt), or on the read pool itself.
func (s *Store) queryRow(ctx context.Context, q querier, query string, args ...any) *sql.Row {
	switch q := q.(type) {
	case *sql.Tx:
		if st := s.hotStmt(ctx, q, query); st != nil {
			return st.QueryRowContext(ctx, args...)
		}
	case *sql.DB:
		if st := s.reads[query]; st != nil && q == s.rdb {
			return st.QueryRowContext(ctx, args...)
		}
	}
	return q.QueryRowContext(ctx, query, args...)
}

// query runs query in tx, through its prepared statement when it has one.
func (s *Store) query(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := s.hotStmt(ctx, tx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}
