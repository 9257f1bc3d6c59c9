package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/runseal/runseal/store"
)

// op is one write: fn runs inside the group's transaction, in its own
// savepoint. fn must derive everything from the database state it reads,
// because a group that hits an infrastructure failure re-runs its members.
type op struct {
	ctx  context.Context
	fn   func(tx *sql.Tx) error
	done chan error
}

// write queues fn for the writer and waits for its commit. The wait does not
// end early when ctx is cancelled: the caller must learn whether its write
// landed. A write whose ctx is already cancelled when its turn comes is
// skipped with ctx's error and writes nothing.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.ops <- o:
	case <-s.closed:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-o.done
}

func (s *Store) writer() {
	defer close(s.done)
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.closed:
			return
		}
		group := []*op{first}
	drain:
		for len(group) < s.maxGroup {
			select {
			case o := <-s.ops:
				group = append(group, o)
			default:
				break drain
			}
		}
		s.commitGroup(group)
	}
}

// commitGroup runs a group in one transaction. A member refused for a
// domain reason rolls back to its savepoint and the group goes on. Any other
// failure poisons the transaction: it is rolled back, the failing member gets
// the error, and the members before and after it run again in a fresh one.
func (s *Store) commitGroup(pending []*op) {
	for len(pending) > 0 {
		pending = s.tryGroup(pending)
	}
}

func (s *Store) tryGroup(pending []*op) (retry []*op) {
	bg := context.Background()
	tx, err := s.wdb.BeginTx(bg, nil)
	if err != nil {
		for _, o := range pending {
			o.done <- fmt.Errorf("begin transaction: %w", err)
		}
		return nil
	}
	s.wtx.Store(tx)
	defer s.wtx.Store(nil)
	var ok []*op
	for i, o := range pending {
		if err := o.ctx.Err(); err != nil {
			o.done <- err
			continue
		}
		if _, err := s.txExec(bg, tx, qSavepoint); err != nil {
			tx.Rollback()
			o.done <- fmt.Errorf("savepoint: %w", err)
			return append(ok, pending[i+1:]...)
		}
		err := o.fn(tx)
		if err == nil {
			if _, err := s.txExec(bg, tx, qRelease); err != nil {
				tx.Rollback()
				o.done <- fmt.Errorf("release savepoint: %w", err)
				return append(ok, pending[i+1:]...)
			}
			ok = append(ok, o)
			continue
		}
		if store.IsDomain(err) {
			_, e1 := tx.ExecContext(bg, "ROLLBACK TO member")
			_, e2 := tx.ExecContext(bg, "RELEASE member")
			if e1 == nil && e2 == nil {
				o.done <- err
				continue
			}
		}
		tx.Rollback()
		o.done <- err
		return append(ok, pending[i+1:]...)
	}
	if err := tx.Commit(); err != nil {
		// SQLite may or may not have made the commit durable when COMMIT
		// reports an I/O error; the members must treat it as in doubt.
		for _, o := range ok {
			o.done <- &store.CommitUnknownError{Detail: err.Error(), Err: err}
		}
		return nil
	}
	for _, o := range ok {
		o.done <- nil
	}
	return nil
}
