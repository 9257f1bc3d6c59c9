package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"syscall"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/store"
)

// startWriter starts the group commit every write goes through: one
// committer on the writer connection, each member in its own savepoint.
func (s *Store) startWriter(maxGroup int, batchAppends bool) {
	c := &groupcommit.SQL{
		DB: s.wdb,
		Exec: func(ctx context.Context, tx *sql.Tx, q string) error {
			_, err := s.txExec(ctx, tx, q)
			return err
		},
		Refused: store.IsDomain,
		InDoubt: func(err error) error {
			// A COMMIT refused for want of space wrote no commit frame, and
			// the driver rolled the transaction back: the outcome is known.
			if full := storageFull(err); full != err {
				return full
			}
			return &store.CommitUnknownError{Detail: err.Error(), Err: err}
		},
		Current: func(tx *sql.Tx) {
			s.wtx.Store(tx)
			if s.wal == nil {
				return
			}
			if tx != nil {
				s.wal.begin()
			} else {
				s.wal.end()
			}
		},
	}
	if s.wal != nil {
		c.Durable = s.wal.answerAfterFlush
	}
	if batchAppends {
		c.Batch = s.appendBatch
	}
	s.writes = groupcommit.New(groupcommit.Config[groupcommit.Work]{Attempt: c.Attempt, MaxGroup: maxGroup, Pipelined: c.Durable != nil})
}

// write queues fn for the writer and waits for its commit. fn runs inside
// the group's transaction, in its own savepoint, and must derive everything
// from the database state it reads, because a group that hits an
// infrastructure failure re-runs its members. The wait does not end early
// when ctx is cancelled: the caller must learn whether its write landed. A
// write whose ctx is already cancelled when its turn comes is skipped with
// ctx's error and writes nothing.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.submit(ctx, groupcommit.Work{Run: func(_ context.Context, tx *sql.Tx) error { return fn(tx) }})
}

// submit queues w for the writer and waits for its answer.
func (s *Store) submit(ctx context.Context, w groupcommit.Work) error {
	err := s.writes.Submit(ctx, w)
	if errors.Is(err, groupcommit.ErrClosed) {
		return store.ErrClosed
	}
	return storageFull(err)
}

// storageFull names a write that failed for want of disk space (SQLite's
// SQLITE_FULL, which it returns for ENOSPC, or ENOSPC itself) as a
// *store.StorageFullError, so that callers can tell the operator what to
// do. SQLite's commit is atomic, so a write refused so did not land.
func storageFull(err error) error {
	if err == nil || errors.Is(err, store.ErrCommitUnknown) || errors.Is(err, store.ErrStorageFull) {
		return err
	}
	var se *msqlite.Error
	if (errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL) || errors.Is(err, syscall.ENOSPC) {
		return &store.StorageFullError{Err: err}
	}
	return err
}

// closeWriter answers every queued write, then stops the writer.
func (s *Store) closeWriter() { s.writes.Close() }
