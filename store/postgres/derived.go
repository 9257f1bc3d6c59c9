package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// Derived rows are the listing rows of a co-located resource (the trial
// lifecycle's outbox pages and study summaries, lifecycle/journalstore):
// rows keyed (scope, pos) in this store's schema and tenant, written in the
// journal's own transaction (Atomic, or WriteDerived for a rebuild) so that
// a row and the record it reflects commit together, and read a page at a
// time by an index range scan. They are never evidence: the resource
// rebuilds them from the journal, which stays the authority.
//
// Each row carries the journal position it reflects (at); PutDerived never
// moves a row back to an earlier position, so a rebuild racing a writer
// cannot undo the writer's row.

func (s *Store) derivedSQL() (put, read string) {
	t := pgx.Identifier{s.schema, "derived_rows"}.Sanitize()
	put = `INSERT INTO ` + t + `(tenant, scope, pos, at, body) VALUES($1, $2, $3, $4, $5)
ON CONFLICT (tenant, scope, pos) DO UPDATE SET at = excluded.at, body = excluded.body
WHERE ` + t + `.at <= excluded.at`
	read = `SELECT pos, at, body FROM ` + t + ` WHERE tenant = $1 AND scope = $2 AND pos > $3 AND pos <= $4 ORDER BY pos LIMIT $5`
	return put, read
}

// PutDerived writes the row (scope, pos) as body, reflecting journal
// position at, inside tx: a transaction of this store's (Atomic's work, or
// WriteDerived's fn). A row already at a later position is left alone.
func (s *Store) PutDerived(ctx context.Context, tx store.AtomicTx, scope string, pos, at int64, body []byte) error {
	if scope == "" {
		return &store.InvalidArgumentError{Field: "scope", Detail: "is empty"}
	}
	put, _ := s.derivedSQL()
	if _, err := tx.Exec(ctx, put, s.tenant, scope, pos, at, body); err != nil {
		return fmt.Errorf("postgres journal: put derived row %s/%d: %w", scope, pos, err)
	}
	return nil
}

// ReadDerived calls each for the rows of scope with after < pos <= upto,
// in pos order, at most limit of them (1 to store.MaxLimit): one index
// range scan.
func (s *Store) ReadDerived(ctx context.Context, scope string, after, upto int64, limit int, each func(pos, at int64, body []byte) error) error {
	if err := store.ValidateLimit(limit); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	_, read := s.derivedSQL()
	rows, err := s.pool.Query(ctx, read, s.tenant, scope, after, upto, limit)
	if err != nil {
		return s.wrap(func() string { return "read derived rows of " + scope }, err)
	}
	defer rows.Close()
	for rows.Next() {
		var pos, at int64
		var body []byte
		if err := rows.Scan(&pos, &at, &body); err != nil {
			return fmt.Errorf("postgres journal: read derived rows of %s: %w", scope, err)
		}
		if err := each(pos, at, body); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return s.wrap(func() string { return "read derived rows of " + scope }, err)
	}
	return nil
}

// WriteDerived runs fn in a transaction of its own, for writing derived
// rows that no journal record accompanies (a rebuild). fn's tx also reads
// a run's head (the Head method), so a rebuild can check, in its
// transaction, that the journal is still where its rows say.
func (s *Store) WriteDerived(ctx context.Context, fn func(ctx context.Context, tx store.AtomicTx) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	what := func() string { return "write derived rows" }
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.wrap(what, notWritten(err))
	}
	defer pc.Release()
	tx, err := pc.Begin(ctx)
	if err != nil {
		return s.wrap(what, notWritten(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	a := &atomicTx{s: s, conn: pc.Conn()}
	err = fn(ctx, a)
	a.done = true
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		if errors.Is(err, pgx.ErrTxClosed) {
			return fmt.Errorf("postgres journal: write derived rows: %w", err)
		}
		return s.wrap(what, err)
	}
	return nil
}

// derivedRowsSchema is the migration step that adds the derived rows. The
// primary key is the listing order, so a page is a range of it.
const derivedRowsSchema = `
CREATE TABLE {S}.derived_rows(
	tenant text COLLATE "C" NOT NULL,
	scope  text COLLATE "C" NOT NULL,
	pos    bigint NOT NULL,
	at     bigint NOT NULL,
	body   bytea NOT NULL,
	PRIMARY KEY (tenant, scope, pos));
`
