package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	logged        *int64 // the log index of the head of a run whose row is open; see unsealed.go
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

// lockRuns is lockRun for n runs in one transaction. The locks are taken
// in run-id order, by every writer, whatever order run gives them in: so
// writers locking several runs cannot deadlock each other. Three
// statements whatever n is: create the missing lease rows, lock them all,
// then read the runs (a separate statement, so that under READ COMMITTED
// it reads what the locks' previous holders committed).
func (x *session) lockRuns(ctx context.Context, run func(i int) store.RunID, n int) ([]locked, error) {
	s := x.s
	ids := make([]string, n)
	at := make(map[string]int, n)
	for i := range ids {
		ids[i] = run(i).String()
		at[ids[i]] = i
	}
	// lockLeases locks in the order of its array (see queries.go).
	slices.Sort(ids)
	b := &pgx.Batch{}
	if n == 1 {
		b.Queue(s.q.placeholder, s.tenant, ids[0])
		b.Queue(s.q.lockLease, s.tenant, ids[0])
		b.Queue(s.q.runState, s.tenant, ids[0])
	} else {
		b.Queue(s.q.placeholders, s.tenant, ids)
		b.Queue(s.q.lockLeases, s.tenant, ids)
		b.Queue(s.q.runStates, s.tenant, ids)
	}
	locks := make([]locked, n)
	err := x.lock(ctx, b, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := readLocks(br, at, locks, n); err != nil {
			return err
		}
		return readRunStates(br, at, locks)
	})
	return locks, err
}

// readLocks reads the result of lockLeases into locks (at maps a run id
// to its index), and checks that want rows were locked (want < 0: any
// number).
func readLocks(br pgx.BatchResults, at map[string]int, locks []locked, want int) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var id string
		var epoch int64
		var l lease
		if err := rows.Scan(&id, &l.owner, &epoch, &l.expires, &l.released, &l.now); err != nil {
			return fmt.Errorf("lock runs: %w", err)
		}
		i, ok := at[id]
		if !ok || epoch < 0 {
			return &store.CorruptError{Detail: fmt.Sprintf("lease row %q is malformed", id)}
		}
		l.epoch = store.Epoch(epoch)
		locks[i].lease = l
		got++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock runs: %w", err)
	}
	if want >= 0 && got != want {
		return fmt.Errorf("lock runs: %d of %d lease rows found", got, want)
	}
	return nil
}

// readRunStates reads the result of runStates into locks.
func readRunStates(br pgx.BatchResults, at map[string]int, locks []locked) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var st runState
		var seq int64
		var hash []byte
		if err := rows.Scan(&id, &seq, &hash, &st.outcome, &st.sealedOutcome, &st.leaf, &st.logIndex, &st.logged); err != nil {
			return fmt.Errorf("read runs: %w", err)
		}
		i, ok := at[id]
		if !ok {
			return &store.CorruptError{Detail: fmt.Sprintf("run row %q is malformed", id)}
		}
		if len(hash) != 32 || seq < 1 {
			return &store.CorruptError{Detail: fmt.Sprintf("run %s's head row is malformed", id)}
		}
		st.exists = true
		st.head = store.Head{Seq: store.Seq(seq), Hash: store.Digest(hash)}
		locks[i].run = st
	}
	return rows.Err()
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
		return &notWrittenError{err: errRetry{"admission key " + strconv.Quote(at.key) + " was taken and then retired during the append"}}
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

// appendPlan is what one append writes, decided under its run's lock: the
// chained records and every derived index they imply.
type appendPlan struct {
	run      store.RunID
	prepared []store.Prepared
	claims   []string // admission keys to claim
	exists   bool     // the run has a row to update
	// the run row's new values
	headSeq                int64
	headHash               []byte
	source, outcome        *string
	awaiting, event, until *string
}

// planAppend decides, under the run's lock, what an append writes, or
// which refusal it gets: the refusals that need the store's state come
// here, the uniqueness refusals from the database's constraints.
func (s *Store) planAppend(l locked, run store.RunID, epoch store.Epoch, batch []store.Append) (*appendPlan, error) {
	if l.run.sealedOutcome != nil {
		return nil, &store.RunSealedError{Run: run, Outcome: *l.run.sealedOutcome}
	}
	if err := l.run.writable(run); err != nil {
		return nil, err
	}
	if err := l.fence(run, epoch); err != nil {
		return nil, err
	}
	prepared, err := store.BuildBatch(l.run.head, epoch, batch)
	if err != nil {
		return nil, err
	}
	p := &appendPlan{run: run, prepared: prepared, exists: l.run.exists}
	var wait *store.Suspension
	for _, r := range prepared {
		if a := r.Facts.Admission; a != nil {
			if a.Key != "" {
				p.claims = append(p.claims, a.Key)
			}
			if a.Source != "" {
				src := a.Source
				p.source = &src
			}
		}
		if r.Facts.Outcome != "" {
			o := r.Facts.Outcome
			p.outcome = &o
		}
		wait = r.Facts.Suspension // the last record decides: any progress clears a wait
	}
	// Claimed in key order, whatever the records' order, like a group's
	// claims (queueRuns): a claim waits for another transaction's claim of
	// the same key, so crossing orders could deadlock.
	slices.Sort(p.claims)
	last := prepared[len(prepared)-1]
	p.headSeq, p.headHash = int64(last.Seq), last.Hash[:]
	if wait != nil {
		a, e := string(wait.Awaiting), wait.Event
		p.awaiting, p.event = &a, &e
		if !wait.Until.IsZero() {
			u := formatUntil(wait.Until)
			p.until = &u
		}
	}
	return p, nil
}

func (p *appendPlan) records() []store.Record {
	recs := make([]store.Record, len(p.prepared))
	for i, r := range p.prepared {
		recs[i] = r.Record
	}
	return recs
}

// queue writes the plan as one statement per row, and returns the mapping
// from a failed statement (counted from the first one queued here) to the
// store error it means: the exactly-once index to DuplicateEffectError,
// the admission key's primary key to a duplicate admission.
func (s *Store) queue(p *appendPlan, b *pgx.Batch) func(int, error) error {
	id := p.run.String()
	type stmt struct {
		effect *store.Digest
		key    string
	}
	var stmts []stmt
	for _, r := range p.prepared {
		caseID, effect := recordColumns(r)
		b.Queue(s.q.insertRecord, s.tenant, id, int64(r.Seq), r.Kind, caseID, effect, r.PrevHash[:], r.Hash[:], r.Raw)
		st := stmt{}
		if r.Kind == store.KindEffectStarted {
			st.effect = r.EffectKey
		}
		stmts = append(stmts, st)
	}
	for _, k := range p.claims { // in key order (see planAppend)
		b.Queue(s.q.claimAdmission, s.tenant, k, id)
		stmts = append(stmts, stmt{key: k})
	}
	if p.exists {
		b.Queue(s.q.updateRun, s.tenant, id, p.headSeq, p.headHash, p.source, p.outcome, p.awaiting, p.event, p.until)
	} else {
		b.Queue(s.q.insertRun, s.tenant, id, p.headSeq, p.headHash, p.source, p.outcome, p.awaiting, p.event, p.until)
	}
	stmts = append(stmts, stmt{})
	run := p.run
	return func(i int, err error) error {
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
}

func recordColumns(r store.Prepared) (*string, []byte) {
	var caseID *string
	if !r.Case.IsZero() {
		c := r.Case.String()
		caseID = &c
	}
	var effect []byte
	if r.EffectKey != nil {
		effect = r.EffectKey[:]
	}
	return caseID, effect
}

// queueMany writes several plans with one statement per table, whatever
// their number: one multi-row insert of every record, one of every new
// run, one update of every existing run (admission claims, rare, one each).
// A constraint violation cannot be pinned on a plan here; the caller
// writes the group again with queue, statement by statement, to find it.
func (s *Store) queueMany(plans []*appendPlan, b *pgx.Batch) {
	var c recordCols
	for _, p := range plans {
		c.add(p)
	}
	b.Queue(s.q.insertRecords, s.tenant, c.run, c.seq, c.kind, c.caseID, c.effect, c.prev, c.hash, c.raw)
	s.queueRuns(plans, b)
}

// queueRuns queues what queueMany writes besides the records: admission
// claims and run rows.
//
// The claims go in key order, whatever the order of the runs claiming
// them: a claim waits for another transaction's uncommitted claim of the
// same key, so two transactions (two processes' groups) claiming keys in
// crossing orders could each hold a key the other waits for, a deadlock
// PostgreSQL breaks only after deadlock_timeout.
func (s *Store) queueRuns(plans []*appendPlan, b *pgx.Batch) {
	type claim struct{ key, run string }
	var claims []claim
	for _, p := range plans {
		for _, k := range p.claims {
			claims = append(claims, claim{k, p.run.String()})
		}
	}
	slices.SortFunc(claims, func(x, y claim) int { return strings.Compare(x.key, y.key) })
	for _, c := range claims {
		b.Queue(s.q.claimAdmission, s.tenant, c.key, c.run)
	}
	var newRuns, upRuns runRows
	for _, p := range plans {
		id := p.run.String()
		if p.exists {
			upRuns.add(id, p)
		} else {
			newRuns.add(id, p)
		}
	}
	if len(newRuns.run) > 0 {
		b.Queue(s.q.insertRuns, newRuns.args(s.tenant)...)
	}
	if len(upRuns.run) > 0 {
		b.Queue(s.q.updateRuns, upRuns.args(s.tenant)...)
	}
}

// recordCols are the records of plans as column arrays, in plan order.
type recordCols struct {
	run, kind          []string
	seq                []int64
	caseID             []*string
	effect, prev, hash [][]byte
	raw                [][]byte
}

func (c *recordCols) add(p *appendPlan) {
	id := p.run.String()
	for _, r := range p.prepared {
		caseID, effect := recordColumns(r)
		c.run = append(c.run, id)
		c.seq = append(c.seq, int64(r.Seq))
		c.kind = append(c.kind, r.Kind)
		c.caseID = append(c.caseID, caseID)
		c.effect = append(c.effect, effect)
		c.prev = append(c.prev, r.PrevHash[:])
		c.hash = append(c.hash, r.Hash[:])
		c.raw = append(c.raw, r.Raw)
	}
}

// runRows are run rows as column arrays, for unnest.
type runRows struct {
	run                                     []string
	seq                                     []int64
	hash                                    [][]byte
	source, outcome, awaiting, event, until []*string
}

func (r *runRows) add(id string, p *appendPlan) {
	r.run = append(r.run, id)
	r.seq = append(r.seq, p.headSeq)
	r.hash = append(r.hash, p.headHash)
	r.source = append(r.source, p.source)
	r.outcome = append(r.outcome, p.outcome)
	r.awaiting = append(r.awaiting, p.awaiting)
	r.event = append(r.event, p.event)
	r.until = append(r.until, p.until)
}

func (r *runRows) args(tenant string) []any {
	return []any{tenant, r.run, r.seq, r.hash, r.source, r.outcome, r.awaiting, r.event, r.until}
}

// untilLayout sorts as text in time order for years 0000-9999, and keeps
// nanoseconds, which a timestamptz would round to micros.
const untilLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatUntil(t time.Time) string { return t.UTC().Format(untilLayout) }
