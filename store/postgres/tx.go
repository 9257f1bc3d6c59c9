package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/store"
)

// A write is two pipelined round trips on one connection:
//
//	lock:   BEGIN; <take the run's lease row lock>; <read state under it>
//	commit: <writes>; COMMIT
//
// Between them the store decides, from what it read under the lock, what to
// write or which refusal to return. Sending COMMIT in the second pipeline
// saves a round trip, and the outcome is still knowable: if any statement
// before it fails the server skips the COMMIT, and only a failure to hear
// back after the pipeline was sent leaves the outcome in doubt.

// maxAttempts bounds retries of a write that failed before its COMMIT was
// sent for a transient reason.
const maxAttempts = 5

// session is one pooled connection carrying one write transaction.
type session struct {
	s    *Store
	pc   *pgxpool.Conn
	conn *pgx.Conn
}

func (s *Store) session(ctx context.Context) (*session, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, notWritten(err)
	}
	return &session{s: s, pc: pc, conn: pc.Conn()}, nil
}

// close ends the session. A transaction still open is rolled back; if that
// fails the pool destroys the connection, which rolls it back server-side.
func (x *session) close() {
	if x.conn.PgConn().TxStatus() != 'I' && !x.conn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = x.conn.Exec(ctx, "rollback")
		cancel()
	}
	x.pc.Release()
}

// lock sends BEGIN and the queued statements in one pipeline and hands each
// result to read, in order. Any failure here means nothing was written.
func (x *session) lock(ctx context.Context, b *pgx.Batch, read func(br pgx.BatchResults) error) error {
	first := &pgx.Batch{}
	first.Queue("begin")
	first.QueuedQueries = append(first.QueuedQueries, b.QueuedQueries...)
	br := x.conn.SendBatch(ctx, first)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return notWritten(err)
	}
	err := read(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil && !store.IsDomain(err) {
		return notWritten(err)
	}
	return err
}

// commit sends the queued writes followed by COMMIT in one pipeline. A
// write that fails is handed to refused, which may map the server's error
// to a store error (a unique violation to a duplicate, say). The pipeline is
// not tied to ctx's cancellation: once it is sent the caller must learn
// whether it landed, so it waits up to CommitTimeout.
//
// A server error before COMMIT is a definite refusal (the server skips the
// rest of the pipeline, COMMIT included). Losing the connection after the
// pipeline was sent is store.CommitUnknownError.
func (x *session) commit(ctx context.Context, b *pgx.Batch, refused func(i int, err error) error) error {
	return x.commitReading(ctx, b, refused, -1, nil)
}

// commitReading is commit, handing the rows of the statement queued at
// index at (if at >= 0) to read.
func (x *session) commitReading(ctx context.Context, b *pgx.Batch, refused func(i int, err error) error, at int, read func(pgx.Rows) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.s.commitTO)
	defer cancel()
	n := len(b.QueuedQueries)
	b.Queue("commit")
	br := x.conn.SendBatch(cctx, b)
	var failure error
	for i := 0; i <= n; i++ {
		var tag pgconn.CommandTag
		var err error
		if i == at {
			err = readRows(br, read)
		} else {
			tag, err = br.Exec()
		}
		if i == n && err == nil && tag.String() != "COMMIT" {
			// The server answered ROLLBACK: the transaction had failed.
			err = pgx.ErrTxCommitRollback
		}
		if err == nil {
			continue
		}
		failure = x.classifyCommit(err, i == n)
		if i < n && refused != nil && isServerErr(err) {
			if mapped := refused(i, err); mapped != nil {
				failure = mapped
			}
		}
		break
	}
	if cerr := br.Close(); failure == nil && cerr != nil {
		failure = x.classifyCommit(cerr, true)
	}
	return failure
}

// readRows hands the next result's rows to read and closes them.
func readRows(br pgx.BatchResults, read func(pgx.Rows) error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := read(rows); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// classifyCommit decides what a failure of the commit pipeline means for
// the caller. atCommit says the failure was the COMMIT's own result.
func (x *session) classifyCommit(err error, atCommit bool) error {
	var pe *pgconn.PgError
	var prep pgx.ErrPreprocessingBatch
	switch {
	case errors.As(err, &pe), errors.Is(err, pgx.ErrTxCommitRollback):
		// The server answered: nothing was committed.
		return notWritten(err)
	case errors.As(err, &prep), pgconn.SafeToRetry(err):
		// The pipeline never left this process.
		return notWritten(err)
	}
	where := "after the write was sent"
	if atCommit {
		where = "waiting for the COMMIT acknowledgement"
	}
	return &store.CommitUnknownError{Detail: fmt.Sprintf("postgres connection failed %s; the write may or may not have landed: %v", where, err), Err: err}
}

func isServerErr(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// notWrittenError marks a failure that certainly wrote nothing: the
// transaction never reached COMMIT, or the server refused it.
type notWrittenError struct{ err error }

func (e *notWrittenError) Error() string { return "not written: " + e.err.Error() }
func (e *notWrittenError) Unwrap() error { return e.err }

func notWritten(err error) error {
	var nw *notWrittenError
	if err == nil || errors.As(err, &nw) || store.IsDomain(err) {
		return err
	}
	var cu *store.CommitUnknownError
	if errors.As(err, &cu) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &notWrittenError{err: err}
}

// errRetry is a failure that wrote nothing and is worth running again.
type errRetry struct{ why string }

func (e errRetry) Error() string { return e.why }

// retryable reports whether a failed attempt may simply run again: it
// wrote nothing and failed for a reason that passes (a serialization
// failure, a deadlock victim, a connection that was dead before use).
func retryable(err error) bool {
	var nw *notWrittenError
	if !errors.As(err, &nw) {
		return false
	}
	var again errRetry
	if errors.As(err, &again) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err)
}

// write runs attempt until it succeeds, fails for good, or runs out of
// retries, and wraps infrastructure failures with what was being done.
// attempt must derive everything it writes from what it reads under its
// own lock, because it may run more than once.
func (s *Store) write(ctx context.Context, what func() string, attempt func(x *session) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	var err error
	for i := 0; i < maxAttempts; i++ {
		if i > 0 {
			d := time.Duration(1<<i)*time.Millisecond + time.Duration(rand.IntN(1000))*time.Microsecond
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		var x *session
		x, err = s.session(ctx)
		if err == nil {
			err = attempt(x)
			x.close()
		}
		if err == nil || !retryable(err) {
			break
		}
	}
	return s.wrap(what, err)
}

// wrap names the operation on an infrastructure failure; store refusals
// and in-doubt commits pass through as they are, so callers can match them.
func (s *Store) wrap(what func() string, err error) error {
	if err == nil || store.IsDomain(err) {
		return err
	}
	var cu *store.CommitUnknownError
	if errors.As(err, &cu) {
		// A new value: one in-doubt group commit answers several callers
		// with the same error.
		return &store.CommitUnknownError{Detail: what() + ": " + cu.Detail, Err: cu.Err}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, store.ErrClosed) {
		return err
	}
	err = fmt.Errorf("postgres journal: %s: %w", what(), err)
	if diskFull(err) {
		// The server refused the transaction: nothing of it was kept.
		return &store.StorageFullError{Err: err}
	}
	return err
}

// diskFull reports whether the server refused a write for want of disk
// space (SQLSTATE 53100, disk_full), which an operator fixes by freeing or
// adding space, with no restart of the journal.
func diskFull(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53100"
}

// read wraps a read's infrastructure failure like wrap does.
func (s *Store) readErr(what string, err error) error {
	if err == nil || store.IsDomain(err) {
		return err
	}
	var ce *store.CorruptError
	if errors.As(err, &ce) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("postgres journal: %s: %w", what, err)
}
