package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/runseal/runseal/store"
)

// Derived rows are the listing rows of a co-located resource (the trial
// lifecycle's outbox pages and study summaries, lifecycle/journalstore):
// rows keyed (scope, pos) in this file and tenant, written in the
// journal's own transaction (Atomic, or WriteDerived for a rebuild) so that
// a row and the record it reflects commit together, and read a page at a
// time by a range scan of the primary key. They are never evidence: the
// resource rebuilds them from the journal, which stays the authority.
//
// Each row carries the journal position it reflects (at); PutDerived never
// moves a row back to an earlier position.

// derivedRowsSchema is schema version 4's addition.
const derivedRowsSchema = `
CREATE TABLE IF NOT EXISTS derived_rows(
	tenant TEXT NOT NULL, scope TEXT NOT NULL, pos INTEGER NOT NULL,
	at INTEGER NOT NULL, body BLOB NOT NULL,
	PRIMARY KEY(tenant, scope, pos)) STRICT, WITHOUT ROWID;
`

const (
	qPutDerived = `INSERT INTO derived_rows(tenant, scope, pos, at, body) VALUES(?, ?, ?, ?, ?)
ON CONFLICT(tenant, scope, pos) DO UPDATE SET at = excluded.at, body = excluded.body WHERE derived_rows.at <= excluded.at`
	qReadDerived = `SELECT pos, at, body FROM derived_rows WHERE tenant = ? AND scope = ? AND pos > ? AND pos <= ? ORDER BY pos LIMIT ?`
)

// PutDerived writes the row (scope, pos) as body, reflecting journal
// position at, inside tx: a transaction of this store's (Atomic's work, or
// WriteDerived's fn). A row already at a later position is left alone.
func (s *Store) PutDerived(ctx context.Context, tx store.AtomicTx, scope string, pos, at int64, body []byte) error {
	if scope == "" {
		return &store.InvalidArgumentError{Field: "scope", Detail: "is empty"}
	}
	if body == nil {
		body = []byte{}
	}
	if _, err := tx.Exec(ctx, qPutDerived, s.tenant, scope, pos, at, body); err != nil {
		return fmt.Errorf("put derived row %s/%d: %w", scope, pos, err)
	}
	return nil
}

// ReadDerived calls each for the rows of scope with after < pos <= upto,
// in pos order, at most limit of them (1 to store.MaxLimit): one range
// scan of the primary key, on the read pool.
func (s *Store) ReadDerived(ctx context.Context, scope string, after, upto int64, limit int, each func(pos, at int64, body []byte) error) error {
	if err := store.ValidateLimit(limit); err != nil {
		return err
	}
	rows, err := s.rdb.QueryContext(ctx, qReadDerived, s.tenant, scope, after, upto, limit)
	if err != nil {
		return fmt.Errorf("read derived rows of %s: %w", scope, err)
	}
	defer rows.Close()
	for rows.Next() {
		var pos, at int64
		var body []byte
		if err := rows.Scan(&pos, &at, &body); err != nil {
			return fmt.Errorf("read derived rows of %s: %w", scope, err)
		}
		if err := each(pos, at, body); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read derived rows of %s: %w", scope, err)
	}
	return nil
}

// WriteDerived runs fn in a transaction of the writer's, for writing
// derived rows that no journal record accompanies (a rebuild). As with
// AppendAtomic, fn may run more than once, each time in a fresh
// transaction; its tx also reads a run's head (the Head method).
func (s *Store) WriteDerived(ctx context.Context, fn func(ctx context.Context, tx store.AtomicTx) error) error {
	wctx := context.WithoutCancel(ctx) // as AppendAtomic's work
	return s.write(ctx, func(tx *sql.Tx) error {
		t := &atomicTx{s: s, tx: tx}
		err := fn(wctx, t)
		t.done = true
		return err
	})
}
