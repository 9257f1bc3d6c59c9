package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/runseal/runseal/internal/groupcommit"
	"github.com/runseal/runseal/store"
)

// Atomic implements store.Journal: a co-located resource in the same file
// (the derived rows of derived.go) commits in the journal's own
// transaction.
func (s *Store) Atomic() store.AtomicJournal { return atomicJournal{s} }

type atomicJournal struct{ s *Store }

// AppendAtomic implements store.AtomicJournal. It goes through the writer
// like every write, alone in its savepoint: the fence is checked before work
// runs, so work never runs for a fenced caller, and work's statements and
// the records it returns commit together or not at all.
//
// Unlike PostgreSQL's, work may run more than once: when another member of
// its group fails for a reason of the infrastructure, the group's
// transaction rolls back (work's statements with it) and work runs again in
// a fresh one. work must therefore derive what it writes from its arguments
// and what it reads in tx. An error from work that is not one of the
// store's refusals (store.IsDomain) also rolls back the group's other
// members, which run again.
func (a atomicJournal) AppendAtomic(ctx context.Context, run store.RunID, epoch store.Epoch, work func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error)) ([]store.Record, error) {
	s := a.s
	if err := store.CheckAtomic(run, epoch, work); err != nil {
		return nil, err
	}
	var out []store.Record
	err := s.submit(ctx, groupcommit.Work{Run: func(wctx context.Context, tx *sql.Tx) error {
		out = nil
		st, err := s.loadRun(wctx, tx, run)
		if err != nil {
			return err
		}
		if err := s.checkWritable(wctx, tx, run, st); err != nil {
			return err
		}
		if err := s.checkFence(wctx, tx, run, epoch); err != nil {
			return err
		}
		// work runs with the writer's context, which ignores the caller's
		// cancellation as every write in the group does: a statement
		// interrupted inside the group's transaction would roll back the
		// whole group.
		t := &atomicTx{s: s, tx: tx}
		batch, err := work(wctx, t)
		t.done = true
		if err != nil {
			return err
		}
		if err := store.CheckAtomicBatch(run, batch); err != nil {
			return err
		}
		parsed, err := store.ParseBatch(epoch, batch)
		if err != nil {
			return err
		}
		out, err = s.appendTx(tx, run, epoch, parsed)
		return err
	}})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// atomicTx is a member's slice of the writer's transaction. It refuses use
// after work returned, so a member cannot write outside the commit it
// joined.
type atomicTx struct {
	s    *Store
	tx   *sql.Tx
	done bool
}

var errTxDone = errors.New("atomic transaction used after its work returned")

// Exec runs a statement in the journal's transaction and returns the rows
// it affected.
func (t *atomicTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	if t.done {
		return 0, errTxDone
	}
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QueryRow runs a query in the journal's transaction.
func (t *atomicTx) QueryRow(ctx context.Context, q string, args ...any) store.Row {
	if t.done {
		return errRow{errTxDone}
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

// Head reads a run's head inside the transaction.
func (t *atomicTx) Head(ctx context.Context, run store.RunID) (store.Head, error) {
	if t.done {
		return store.Head{}, errTxDone
	}
	st, err := t.s.loadRun(ctx, t.tx, run)
	return st.head, err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
