package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// Atomic implements store.Journal: a co-located resource in the same
// database can commit in the journal's own transaction.
func (s *Store) Atomic() store.AtomicJournal { return atomicJournal{s} }

type atomicJournal struct{ s *Store }

// AppendAtomic implements store.AtomicJournal. The run's lock is taken and
// the fence checked before work runs, so work never runs for a fenced
// caller; work's statements, the records it returns and every derived
// index then commit together or not at all. It is not retried: work is the
// caller's code and may not be safe to run twice. A lost COMMIT
// acknowledgement is store.CommitUnknownError.
func (a atomicJournal) AppendAtomic(ctx context.Context, run store.RunID, epoch store.Epoch, work func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error)) ([]store.Record, error) {
	s := a.s
	if err := store.CheckAtomic(run, epoch, work); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	what := func() string { return "atomic append to run " + run.String() }
	x, err := s.session(ctx)
	if err != nil {
		return nil, s.wrap(what, err)
	}
	defer x.close()
	l, err := x.lockRun(ctx, run)
	if err != nil {
		return nil, s.wrap(what, err)
	}
	if l.run.sealedOutcome != nil {
		return nil, &store.RunSealedError{Run: run, Outcome: *l.run.sealedOutcome}
	}
	if err := l.run.writable(run); err != nil {
		return nil, err
	}
	if err := l.fence(run, epoch); err != nil {
		return nil, err
	}
	tx := &atomicTx{s: s, run: run, conn: x.conn}
	batch, err := work(ctx, tx)
	tx.done = true
	if err != nil {
		return nil, err
	}
	if x.conn.PgConn().TxStatus() != 'T' {
		return nil, fmt.Errorf("postgres journal: %s: the member's work left the transaction (status %q); nothing was written", what(), x.conn.PgConn().TxStatus())
	}
	if err := store.CheckAtomicBatch(run, batch); err != nil {
		return nil, err
	}
	plan, err := s.planAppend(l, run, epoch, batch)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	refused := s.queue(plan, b)
	if err := x.commit(ctx, b, refused); err != nil {
		return nil, s.wrap(what, s.explainRefusal(ctx, x, err))
	}
	return plan.records(), nil
}

// atomicTx is the member's slice of the journal's transaction. It refuses
// use after work returned, so a member cannot write outside the commit it
// joined.
type atomicTx struct {
	s    *Store
	run  store.RunID // the run AppendAtomic locked
	conn *pgx.Conn
	done bool
}

// Exec runs a statement in the journal's transaction and returns the rows
// it affected.
func (t *atomicTx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if t.done {
		return 0, fmt.Errorf("atomic transaction used after its work returned")
	}
	tag, err := t.conn.Exec(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// QueryRow runs a query in the journal's transaction.
func (t *atomicTx) QueryRow(ctx context.Context, sql string, args ...any) store.Row {
	if t.done {
		return errRow{fmt.Errorf("atomic transaction used after its work returned")}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
