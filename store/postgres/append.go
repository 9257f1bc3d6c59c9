package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runseal/runseal/store"
)

// lease is a run's lease row as read under its lock.
type lease struct {
	owner    string
	epoch    store.Epoch
	expires  time.Time
	released bool
	now      time.Time // the database's clock when the lock was granted
}

// live reports whether the lease is held: granted, not released, unexpired.
func (l lease) live() bool { return l.epoch > 0 && !l.released && l.expires.After(l.now) }

// runState is what a write needs to know about a run, read under its lock.
type runState struct {
	exists        bool
	head          store.Head
	outcome       *string // latest conclusion
	sealedOutcome *string
	leaf          []byte
	logIndex      *int64
}

// locked is a run's state inside a write transaction that holds its lock.
type locked struct {
	lease lease
	run   runState
}

// lockRun opens the write transaction and takes run's lock: the lease row,
// created as a placeholder if the run was never touched. What it returns
// cannot change until the transaction ends.
func (x *session) lockRun(ctx context.Context, run store.RunID) (locked, error) {
	ls, err := x.lockRuns(ctx, func(int) store.RunID { return run }, 1)
	if err != nil {
		return locked{}, err
	}
	return ls[0], nil
}

// lockRuns is lockRun for n runs in one transaction, in the order given,
// which must be run-id order.
func (x *session) lockRuns(ctx context.Context, run func(i int) store.RunID, n int) ([]locked, error) {
	s := x.s
	b := &pgx.Batch{}
	for i := 0; i < n; i++ {
		id := run(i).String()
		b.Queue(s.q.placeholder, s.tenant, id)
		b.Queue(s.q.lockLease, s.tenant, id)
		b.Queue(s.q.runState, s.tenant, id)
	}
	locks := make([]locked, n)
	err := x.lock(ctx, b, func(br pgx.BatchResults) error {
		for i := range locks {
			r := run(i)
			if _, err := br.Exec(); err != nil {
				return err
			}
			var epoch int64
			l := &locks[i]
			if err := br.QueryRow().Scan(&l.lease.owner, &epoch, &l.lease.expires, &l.lease.released, &l.lease.now); err != nil {
				return fmt.Errorf("lock run %s: %w", r, err)
			}
			if epoch < 0 {
				return &store.CorruptError{Run: r, Detail: "lease epoch is negative"}
			}
			l.lease.epoch = store.Epoch(epoch)
			st, err := scanRunState(br.QueryRow(), r)
			if err != nil {
				return err
			}
			l.run = st
		}
		return nil
	})
	return locks, err
}

func scanRunState(row pgx.Row, run store.RunID) (runState, error) {
	var st runState
	var seq int64
	var hash []byte
	err := row.Scan(&seq, &hash, &st.outcome, &st.sealedOutcome, &st.leaf, &st.logIndex)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read run %s: %w", run, err)
	}
	if len(hash) != 32 || seq < 1 {
		return st, &store.CorruptError{Run: run, Detail: "run head row is malformed"}
	}
	st.exists = true
	st.head = store.Head{Seq: store.Seq(seq), Hash: store.Digest(hash)}
	return st, nil
}

// fence refuses epoch unless it is the run's current lease epoch. A run
// never leased (epoch 0) accepts any epoch: restore replays before any
// lease exists.
func (l locked) fence(run store.RunID, epoch store.Epoch) error {
	if l.lease.epoch != 0 && l.lease.epoch != epoch {
		return &store.FencedError{Run: run, Held: epoch, Current: l.lease.epoch}
	}
	return nil
}

// Append implements store.Journal.
func (s *Store) Append(ctx context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	run, err := store.ValidateBatch(epoch, batch)
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.enqueueAppend(ctx, run, epoch, batch)
}

// admissionTaken is the refusal of a claimed admission key before the
// holder is known; the holder is read after the transaction ended.
type admissionTaken struct {
	key string
	err error
}

func (e *admissionTaken) Error() string { return "admission key taken: " + e.err.Error() }
func (e *admissionTaken) Unwrap() error { return e.err }

// explainRefusal completes an admission refusal with the key's holder. If
// the holder retired the key in the meantime, the append is retried.
// It reads on the session's own connection, after rolling back, so that a
// refusal never needs a second connection from a pool that may be empty.
func (s *Store) explainRefusal(ctx context.Context, x *session, err error) error {
	var at *admissionTaken
	if !errors.As(err, &at) {
		return err
	}
	if _, rerr := x.conn.Exec(ctx, "rollback"); rerr != nil {
		return notWritten(fmt.Errorf("admission key %q is taken, and rolling back failed: %w", at.key, rerr))
	}
	var holder string
	qerr := x.conn.QueryRow(ctx, s.q.admissionHolder, s.tenant, at.key).Scan(&holder)
	if errors.Is(qerr, pgx.ErrNoRows) {
		// Forgotten between our insert and this read: try again.
		return &notWrittenError{err: &pgconn.PgError{Code: "40001", Message: "admission key retired during the append; retrying"}}
	}
	if qerr != nil {
		return notWritten(fmt.Errorf("admission key %q is taken, and reading its holder failed: %w", at.key, qerr))
	}
	h, perr := store.ParseRunID(holder)
	if perr != nil {
		return &store.CorruptError{Detail: fmt.Sprintf("admission key %q names unparseable run %q", at.key, holder)}
	}
	return &store.DuplicateAdmissionError{Key: at.key, Holder: h}
}

// prepareAppend decides, under the run's lock, what an append writes: the
// refusals that need the store's state, the chained records, and the
// statements that write them and every derived index. refused maps a
// constraint violation of statement i to the store error it means.
func (s *Store) prepareAppend(l locked, run store.RunID, epoch store.Epoch, batch []store.Append) ([]store.Record, *pgx.Batch, func(int, error) error, error) {
	if l.run.sealedOutcome != nil {
		return nil, nil, nil, &store.RunSealedError{Run: run, Outcome: *l.run.sealedOutcome}
	}
	if err := l.fence(run, epoch); err != nil {
		return nil, nil, nil, err
	}
	prepared, err := store.BuildBatch(l.run.head, epoch, batch)
	if err != nil {
		return nil, nil, nil, err
	}
	id := run.String()
	b := &pgx.Batch{}
	// What each statement is, for mapping its constraint violation.
	type stmt struct {
		effect *store.Digest
		key    string
	}
	var stmts []stmt
	var source, outcome *string
	var wait *store.Suspension
	for _, p := range prepared {
		var caseID *string
		if !p.Case.IsZero() {
			c := p.Case.String()
			caseID = &c
		}
		var effect []byte
		if p.EffectKey != nil {
			effect = p.EffectKey[:]
		}
		b.Queue(s.q.insertRecord, s.tenant, id, int64(p.Seq), p.Kind, caseID, effect, p.PrevHash[:], p.Hash[:], p.Raw)
		st := stmt{}
		if p.Kind == store.KindEffectStarted {
			st.effect = p.EffectKey
		}
		stmts = append(stmts, st)
		if a := p.Facts.Admission; a != nil {
			if a.Key != "" {
				b.Queue(s.q.claimAdmission, s.tenant, a.Key, id)
				stmts = append(stmts, stmt{key: a.Key})
			}
			if a.Source != "" {
				src := a.Source
				source = &src
			}
		}
		if p.Facts.Outcome != "" {
			o := p.Facts.Outcome
			outcome = &o
		}
		wait = p.Facts.Suspension // the last record decides: any progress clears a wait
	}
	last := prepared[len(prepared)-1]
	var awaiting, event, until *string
	if wait != nil {
		a, e := string(wait.Awaiting), wait.Event
		awaiting, event = &a, &e
		if !wait.Until.IsZero() {
			u := formatUntil(wait.Until)
			until = &u
		}
	}
	if l.run.exists {
		b.Queue(s.q.updateRun, s.tenant, id, int64(last.Seq), last.Hash[:], source, outcome, awaiting, event, until)
	} else {
		b.Queue(s.q.insertRun, s.tenant, id, int64(last.Seq), last.Hash[:], source, outcome, awaiting, event, until)
	}
	stmts = append(stmts, stmt{})
	refused := func(i int, err error) error {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23505" || i >= len(stmts) { // unique_violation
			return nil
		}
		switch st := stmts[i]; {
		case st.effect != nil && pe.ConstraintName == "records_effect":
			return &store.DuplicateEffectError{Run: run, Key: *st.effect}
		case st.key != "" && pe.ConstraintName == "admissions_pkey":
			return &admissionTaken{key: st.key, err: err}
		}
		return nil
	}
	recs := make([]store.Record, len(prepared))
	for i, p := range prepared {
		recs[i] = p.Record
	}
	return recs, b, refused, nil
}

// untilLayout sorts as text in time order for years 0000-9999, and keeps
// nanoseconds, which a timestamptz would round to micros.
const untilLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatUntil(t time.Time) string { return t.UTC().Format(untilLayout) }
