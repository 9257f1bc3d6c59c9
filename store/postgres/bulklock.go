package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// Locking a bulk of runs the way a bulk write does: lockRuns' rule (every
// write holds its runs' lease rows, taken in run-id order), paid once per
// run instead of three times for the runs the bulk creates.
//
// A lease row this transaction inserts is as good as locked by it: no
// other transaction sees the row before commit, and one that inserts or
// locks the same run waits on the unique index or the row until this one
// ends, then reads what it committed. Locking it again (FOR UPDATE) and
// reading a run row that cannot exist (every writer creates a run's lease
// row before its run row, in the same transaction) would only write and
// read each new run's pages once more: in a restore that is half the
// statement time of the appends. The runs whose lease rows already
// existed are locked and read as lockRuns does.

// bulkLockSQL is the statement that creates the missing lease rows of a
// bulk and returns the runs it created, locked by that insertion.
func (s *Store) bulkLockSQL() string {
	return strings.ReplaceAll(`INSERT INTO {S}.leases(tenant, run, owner, epoch, expires_at, released)
	SELECT $1, r, '', 0, 'epoch', true FROM unnest($2::text[]) AS r ON CONFLICT (tenant, run) DO NOTHING RETURNING run`,
		"{S}", pgx.Identifier{s.schema}.Sanitize())
}

// lockBulk opens the write transaction and takes the locks of the runs
// ids names, in run-id order (ids must be sorted). With create it creates
// the lease rows that are missing, as lockRuns does, and the runs it
// created need no further statement: they are new (never leased, no run
// row). Without create (a bulk of seals: every run to seal was written, so
// has its lease row) a run without a lease row comes back as not existing.
// It returns the lock state of each run, in ids' order.
func (x *session) lockBulk(ctx context.Context, ids []string, create bool) ([]locked, error) {
	s := x.s
	at := make(map[string]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	locks := make([]locked, len(ids))
	created := make([]bool, len(ids))
	rest := ids
	if create {
		b := &pgx.Batch{}
		b.Queue(s.bulkLockSQL(), s.tenant, ids)
		n := 0
		err := x.lock(ctx, b, func(br pgx.BatchResults) error {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return fmt.Errorf("lock runs: %w", err)
				}
				i, ok := at[id]
				if !ok || created[i] {
					return &store.CorruptError{Detail: fmt.Sprintf("lease row %q is malformed", id)}
				}
				created[i] = true
				n++
			}
			return rows.Err()
		})
		if err != nil {
			return nil, err
		}
		if n == len(ids) {
			return locks, nil // all new: the zero locked is a never-leased run without a row
		}
		rest = make([]string, 0, len(ids)-n)
		for i, id := range ids {
			if !created[i] {
				rest = append(rest, id)
			}
		}
	}
	b := &pgx.Batch{}
	b.Queue(s.q.lockLeases, s.tenant, rest)
	b.Queue(s.q.runStates, s.tenant, rest)
	read := func(br pgx.BatchResults) error {
		want := len(rest)
		if !create {
			want = -1 // a run without a lease row was never written
		}
		if err := readLocks(br, at, locks, want); err != nil {
			return err
		}
		return readRunStates(br, at, locks)
	}
	var err error
	if create {
		err = x.more(ctx, b, read)
	} else {
		err = x.lock(ctx, b, read)
	}
	if err != nil {
		return nil, err
	}
	return locks, nil
}

// more sends the queued statements in the transaction lock opened, in one
// pipeline, and hands each result to read, in order. Like lock, any
// failure here means nothing was written.
func (x *session) more(ctx context.Context, b *pgx.Batch, read func(br pgx.BatchResults) error) error {
	br := x.conn.SendBatch(ctx, b)
	err := read(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil && !store.IsDomain(err) {
		return notWritten(err)
	}
	return err
}
