package groupcommit

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Work is one member of a database/sql group.
type Work struct {
	// Run writes the member alone, inside the group's transaction, in its
	// own savepoint. It must derive everything from the database state it
	// reads and its own inputs, because a group that hits an
	// infrastructure failure runs its other members again in a fresh
	// transaction. Its ctx carries the caller's values without its
	// cancellation: a caller giving up once its member has started must
	// not poison the transaction of the whole group.
	Run func(ctx context.Context, tx *sql.Tx) error
	// Batched, if not nil, lets SQL.Batch write this member together with
	// the batched members next to it in the group, with a few multi-row
	// statements instead of a savepoint and statements of its own.
	Batched any

	alone bool // a batch holding it failed: from now on it runs alone
}

// A Batch writes consecutive batched members (their Work.Batched values,
// in order) in tx. It returns one error per member: nil for a member it
// wrote, or a refusal for one it refused having written nothing for it.
// Any other failure it returns as err, poisoning the transaction: SQL then
// rolls it back and runs those members again, each alone with its Run, so
// the failure is pinned on its own member.
type Batch func(ctx context.Context, tx *sql.Tx, reqs []any) (refusals []error, err error)

// The statements SQL runs around each member.
const (
	Savepoint  = "SAVEPOINT member"
	Release    = "RELEASE member"
	RollbackTo = "ROLLBACK TO member"
)

// SQL writes groups of Work in one database/sql transaction, each member in
// its own savepoint. A member refused for a reason of its own (Refused)
// rolls back to its savepoint and the group goes on. Any other failure
// poisons the transaction: it is rolled back, the failing member gets the
// error, and the members before and after it are returned to run again in
// a fresh transaction. A failed COMMIT leaves the outcome in doubt and every
// member that had succeeded gets InDoubt's error.
type SQL struct {
	// DB begins the transactions; it should be the one writer connection.
	DB *sql.DB
	// Exec runs one of Savepoint, Release, RollbackTo in tx, for instance
	// through a prepared statement; tx.ExecContext when nil.
	Exec func(ctx context.Context, tx *sql.Tx, query string) error
	// Refused reports a member's error that rolls back that member only.
	Refused func(error) bool
	// Failed wraps an infrastructure failure at step ("begin transaction",
	// "savepoint", "release savepoint"); fmt.Errorf("%s: %w") when nil.
	Failed func(step string, err error) error
	// InDoubt wraps a COMMIT failure; the error itself when nil.
	InDoubt func(err error) error
	// Current, if set, is told the open transaction, and nil when it ends
	// (statements prepared on the writer connection may only run in it).
	Current func(tx *sql.Tx)
	// Batch, if set, writes runs of batched members together.
	Batch Batch
	// Committed, if set, is told the size and duration of every committed
	// group (metrics).
	Committed func(n int, d time.Duration)
	// Durable, if set, holds back every answer of an attempt (a member's
	// success, its refusal, any failure) until what the attempt wrote and
	// read is durable. Attempt calls it once per attempt that answers
	// anyone, after the transaction has ended, with a function that sends
	// the answers. Durable must call that function exactly once: with nil
	// after a flush of the log that began after Durable was called has
	// finished, or with the flush's failure, which every member of the
	// attempt then gets, through InDoubt, instead of its own answer.
	// A refusal waits too: it was read from state that may not be durable
	// yet (an earlier group's lease, say). Durable may return before it
	// calls the function (the flush then overlaps the next group), so the
	// committer goes on while the flush runs.
	Durable func(answer func(syncErr error))
}

// Attempt implements Attempt for Work.
func (c *SQL) Attempt(pending []*Member[Work]) ([]*Member[Work], error) {
	a := answers{durable: c.Durable}
	retry, err := c.attempt(pending, &a)
	a.send(c.InDoubt)
	return retry, err
}

// answers holds an attempt's answers until it ends, so that with Durable
// they all wait for one flush.
type answers struct {
	durable func(answer func(syncErr error))
	ms      []*Member[Work]
	errs    []error
}

// answer keeps m's answer err.
func (a *answers) answer(m *Member[Work], err error) {
	a.ms, a.errs = append(a.ms, m), append(a.errs, err)
}

// send gives the kept answers: at once, or through durable once the flush
// that began after the attempt's transaction ended has finished.
func (a *answers) send(inDoubt func(error) error) {
	if len(a.ms) == 0 {
		return
	}
	ms, errs := a.ms, a.errs
	give := func(syncErr error) {
		if syncErr != nil && inDoubt != nil {
			syncErr = inDoubt(syncErr)
		}
		for i, m := range ms {
			if syncErr != nil {
				m.Answer(syncErr)
			} else {
				m.Answer(errs[i])
			}
		}
	}
	if a.durable == nil {
		give(nil)
		return
	}
	a.durable(give)
}

func (c *SQL) attempt(pending []*Member[Work], a *answers) ([]*Member[Work], error) {
	bg := context.Background()
	start := time.Now()
	tx, err := c.DB.BeginTx(bg, nil)
	if err != nil {
		err = c.failed("begin transaction", err)
		for _, m := range pending {
			a.answer(m, err)
		}
		return nil, err
	}
	if c.Current != nil {
		c.Current(tx)
		defer c.Current(nil)
	}
	var ok []*Member[Work]
	for i := 0; i < len(pending); i++ {
		m := pending[i]
		if err := m.Ctx.Err(); err != nil {
			a.answer(m, err)
			continue
		}
		if j := c.batchEnd(pending, i); j > i {
			wrote, err := c.batch(bg, tx, pending[i:j], a)
			if err != nil {
				tx.Rollback()
				return append(ok, pending[i:]...), err
			}
			ok = append(ok, wrote...)
			i = j - 1
			continue
		}
		if err := c.exec(bg, tx, Savepoint); err != nil {
			tx.Rollback()
			err = c.failed("savepoint", err)
			a.answer(m, err)
			return append(ok, pending[i+1:]...), err
		}
		err := m.Req.Run(context.WithoutCancel(m.Ctx), tx)
		if err == nil {
			if err := c.exec(bg, tx, Release); err != nil {
				tx.Rollback()
				err = c.failed("release savepoint", err)
				a.answer(m, err)
				return append(ok, pending[i+1:]...), err
			}
			ok = append(ok, m)
			continue
		}
		if c.Refused != nil && c.Refused(err) {
			e1 := c.exec(bg, tx, RollbackTo)
			e2 := c.exec(bg, tx, Release)
			if e1 == nil && e2 == nil {
				a.answer(m, err)
				continue
			}
		}
		tx.Rollback()
		a.answer(m, err)
		return append(ok, pending[i+1:]...), err
	}
	if err := tx.Commit(); err != nil {
		// SQLite may or may not have made the commit durable when COMMIT
		// reports an I/O error: the members must treat it as in doubt.
		if c.InDoubt != nil {
			err = c.InDoubt(err)
		}
		for _, m := range ok {
			a.answer(m, err)
		}
		return nil, err
	}
	if c.Committed != nil && len(ok) > 0 {
		c.Committed(len(ok), time.Since(start))
	}
	for _, m := range ok {
		a.answer(m, nil)
	}
	return nil, nil
}

// batchEnd returns the end of the run of batched members starting at i.
func (c *SQL) batchEnd(ms []*Member[Work], i int) int {
	if c.Batch == nil {
		return i
	}
	j := i
	for j < len(ms) && ms[j].Req.Batched != nil && !ms[j].Req.alone && ms[j].Ctx.Err() == nil {
		j++
	}
	return j
}

// batch writes seg with c.Batch. It answers the refused members and returns
// the written ones. On failure it answers nobody, marks seg's members to
// run alone, and returns no member.
func (c *SQL) batch(ctx context.Context, tx *sql.Tx, seg []*Member[Work], a *answers) ([]*Member[Work], error) {
	reqs := make([]any, len(seg))
	for k, m := range seg {
		reqs[k] = m.Req.Batched
	}
	refusals, err := c.Batch(ctx, tx, reqs)
	if err == nil && len(refusals) != len(seg) {
		err = fmt.Errorf("groupcommit: batch answered %d of %d members", len(refusals), len(seg))
	}
	if err != nil {
		for _, m := range seg {
			m.Req.alone = true
		}
		return nil, err
	}
	var wrote []*Member[Work]
	for k, m := range seg {
		if refusals[k] != nil {
			a.answer(m, refusals[k])
			continue
		}
		wrote = append(wrote, m)
	}
	return wrote, nil
}

func (c *SQL) exec(ctx context.Context, tx *sql.Tx, q string) error {
	if c.Exec != nil {
		return c.Exec(ctx, tx, q)
	}
	_, err := tx.ExecContext(ctx, q)
	return err
}

func (c *SQL) failed(step string, err error) error {
	if c.Failed != nil {
		return c.Failed(step, err)
	}
	return fmt.Errorf("%s: %w", step, err)
}
