// Package faulty decorates a store.Journal with deterministic faults at the
// seam where real ones happen, and provides Shared, a double that answers
// IsShared() == true over a single-writer store.
//
// The fault a journal caller must survive is committed-then-lost: the write
// committed but the acknowledgement never arrived, so the outcome is unknown
// and the retry must be safe (exactly-once, first seal wins, idempotent
// cancel). LoseAck injects exactly that: the inner call runs and commits,
// and the caller gets a *store.CommitUnknownError.
//
// A write can fail at three points: before the inner call (FailBeforeCommit:
// nothing ran), inside the inner transaction after the caller's work ran
// (FailInTx: for AppendAtomic, whatever the work wrote in the journal's
// transaction rolls back with the records), and after the commit (LoseAck).
// The optional interfaces' writes and reads (signed checkpoints, the
// publication outbox, cosignatures and witness state, alarms, the
// disclosure register, tokens) fail on the same schedule (optional.go).
//
// Faults are chosen per operation from a seeded schedule: the n-th
// operation's fault depends only on the seed and n, so a failing test
// replays by rerunning with the seed every failure message carries. (With
// concurrent callers the order in which operations take their numbers is
// the scheduler's; a single-goroutine test replays exactly.)
package faulty

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/runseal/runseal/internal/optional"
	"github.com/runseal/runseal/store"
)

// Fault is one injected failure.
type Fault uint8

// The faults.
const (
	None             Fault = iota
	FailBeforeCommit       // the call fails and nothing is written
	LoseAck                // the call commits, and the caller is told the outcome is unknown
	Slow                   // the call waits Options.SlowFor (or until its context ends), then runs
	Closed                 // the store closes: this call and every later one fail with store.ErrClosed
	// FailInTx fails inside the inner transaction after the caller's work
	// ran: AppendAtomic's work runs in the journal's transaction, then the
	// transaction rolls back, taking what the work wrote with it. A write
	// with no caller work inside its transaction fails as FailBeforeCommit.
	FailInTx
)

func (f Fault) String() string {
	switch f {
	case None:
		return "none"
	case FailBeforeCommit:
		return "fail-before-commit"
	case LoseAck:
		return "commit-then-lose-ack"
	case Slow:
		return "slow"
	case Closed:
		return "closed"
	case FailInTx:
		return "fail-inside-transaction"
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

// ErrInjected classes every failure this package makes up.
var ErrInjected = errors.New("injected fault")

// InjectedError is a made-up failure, with what is needed to replay it.
type InjectedError struct {
	Fault  Fault
	Op     uint64 // the operation's number, from 1 (0: a call outside Options.Only after Closed)
	Method string
	Seed   uint64
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("faulty: injected %s at op %d (%s) [replay: faulty.Options{Seed: %d}]", e.Fault, e.Op, e.Method, e.Seed)
}

// Unwrap leads to ErrInjected and, for Closed, store.ErrClosed.
func (e *InjectedError) Unwrap() []error {
	if e.Fault == Closed {
		return []error{ErrInjected, store.ErrClosed}
	}
	return []error{ErrInjected}
}

// Options sets the schedule. With every rate zero and At empty, the
// decorator injects nothing and is the store it wraps.
type Options struct {
	Seed uint64
	// Per-operation probabilities of each fault (their sum at most 1).
	FailBeforeCommit, LoseAck, Slow, Close, FailInTx float64
	// At forces the fault of given operation numbers, over the rates.
	At map[uint64]Fault
	// Only restricts the schedule to these methods (nil: every faultable
	// one): only their calls are numbered and draw a fault, so "the n-th
	// write" stays the n-th write however many reads come between. Calls
	// of other methods run untouched (but fail once the store is Closed).
	Only []string
	// Trace keeps every numbered operation, faulted or not, for Ops: a
	// test learns from a clean run which operation to fault.
	Trace bool
	// SlowFor is how long a Slow operation waits; 50ms when zero.
	SlowFor time.Duration
}

// Journal is a store.Journal that fails on schedule.
type Journal struct {
	store.Journal
	optional.Delegate
	o Options

	mu     sync.Mutex
	rng    *rand.Rand
	n      uint64
	closed bool
	log    []Op // the faults injected
	trace  []Op // every numbered operation, with Options.Trace
}

// Op is one numbered operation and the fault it drew.
type Op struct {
	N      uint64
	Method string
	// Detail is the kind of the first record of an Append or
	// AppendAtomic (known for AppendAtomic once its work has run).
	Detail string
	Fault  Fault
}

func (o Op) String() string {
	s := fmt.Sprintf("op %d %s", o.N, o.Method)
	if o.Detail != "" {
		s += " " + o.Detail
	}
	if o.Fault != None {
		s += ": " + o.Fault.String()
	}
	return s
}

var _ store.Journal = (*Journal)(nil)

// New wraps inner with the schedule o.
func New(inner store.Journal, o Options) *Journal {
	j := &Journal{Journal: inner, Delegate: optional.Delegate{Inner: inner}}
	j.Schedule(o)
	return j
}

// Schedule replaces the schedule with o and numbers operations from 1
// again, as if the journal had just been wrapped (a Closed journal opens
// again: its inner store was never closed). A test sets up its state
// without faults and then schedules the ones it studies.
func (j *Journal) Schedule(o Options) {
	if o.SlowFor == 0 {
		o.SlowFor = 50 * time.Millisecond
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.o, j.n, j.closed, j.log, j.trace = o, 0, false, nil, nil
	j.rng = rand.New(rand.NewPCG(o.Seed, 0x72756e7365616c))
}

// Inner returns the journal j wraps (where lifecycle/journalstore finds
// the one-writer lock of a file journal).
func (j *Journal) Inner() store.Journal { return j.Journal }

// Seed is the schedule's seed, for failure messages of tests using it.
func (j *Journal) Seed() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.o.Seed
}

// Injected lists the faults injected so far, in operation order.
func (j *Journal) Injected() []Op {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Op(nil), j.log...)
}

// Ops lists every numbered operation so far, faulted or not, when the
// schedule has Options.Trace; nil otherwise.
func (j *Journal) Ops() []Op {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Op(nil), j.trace...)
}

// call is one operation in flight: its number and what it drew.
type call struct {
	j     *Journal
	n     uint64
	fault Fault
	err   *InjectedError
	slow  time.Duration
}

// detail records the kind of an operation's first record in the logs.
func (c call) detail(kind string) {
	if c.n == 0 {
		return
	}
	c.j.mu.Lock()
	defer c.j.mu.Unlock()
	for _, l := range [][]Op{c.j.log, c.j.trace} {
		for i := len(l) - 1; i >= 0 && l[i].N >= c.n; i-- {
			if l[i].N == c.n {
				l[i].Detail = kind
			}
		}
	}
}

// next numbers an operation and draws its fault. Every numbered operation
// draws, faulted or not, so operation n's fault depends only on the seed
// and n.
func (j *Journal) next(method, detail string, write bool) call {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.o.Only != nil && !slices.Contains(j.o.Only, method) {
		if j.closed {
			return call{j: j, fault: Closed, err: &InjectedError{Fault: Closed, Method: method, Seed: j.o.Seed}}
		}
		return call{j: j}
	}
	j.n++
	x := j.rng.Float64()
	if j.closed {
		return call{j: j, n: j.n, fault: Closed, err: &InjectedError{Fault: Closed, Op: j.n, Method: method, Seed: j.o.Seed}}
	}
	f, forced := j.o.At[j.n]
	if !forced {
		o := j.o
		switch {
		case x < o.FailBeforeCommit:
			f = FailBeforeCommit
		case x < o.FailBeforeCommit+o.LoseAck:
			f = LoseAck
		case x < o.FailBeforeCommit+o.LoseAck+o.Slow:
			f = Slow
		case x < o.FailBeforeCommit+o.LoseAck+o.Slow+o.Close:
			f = Closed
		case x < o.FailBeforeCommit+o.LoseAck+o.Slow+o.Close+o.FailInTx:
			f = FailInTx
		}
	}
	if (f == LoseAck || f == FailInTx) && !write {
		f = FailBeforeCommit // a read has no transaction to roll back nor acknowledgement to lose
	}
	op := Op{N: j.n, Method: method, Detail: detail, Fault: f}
	if j.o.Trace {
		j.trace = append(j.trace, op)
	}
	if f == None {
		return call{j: j, n: j.n}
	}
	if f == Closed {
		j.closed = true
	}
	j.log = append(j.log, op)
	return call{j: j, n: j.n, fault: f, err: &InjectedError{Fault: f, Op: j.n, Method: method, Seed: j.o.Seed}, slow: j.o.SlowFor}
}

// do runs inner under the operation's fault.
func do[T any](ctx context.Context, j *Journal, method string, write bool, inner func() (T, error)) (T, error) {
	return doDetail(ctx, j, method, "", write, inner)
}

func doDetail[T any](ctx context.Context, j *Journal, method, detail string, write bool, inner func() (T, error)) (T, error) {
	return perform(ctx, j.next(method, detail, write), inner)
}

// perform runs inner under c's fault. FailInTx reaches here only for a write
// with no caller work in its transaction, where it is FailBeforeCommit.
func perform[T any](ctx context.Context, c call, inner func() (T, error)) (T, error) {
	var zero T
	ie := c.err
	switch c.fault {
	case FailBeforeCommit, Closed, FailInTx:
		return zero, ie
	case Slow:
		t := time.NewTimer(c.slow)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-t.C:
		}
	case LoseAck:
		if _, err := inner(); err != nil {
			return zero, err // it did not commit: the caller hears why
		}
		return zero, &store.CommitUnknownError{Detail: ie.Error(), Err: ie}
	}
	return inner()
}

func firstKind(batch []store.Append) string {
	if len(batch) == 0 {
		return ""
	}
	return batch[0].Kind
}

// Append fails on schedule.
func (j *Journal) Append(ctx context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	return doDetail(ctx, j, "Append", firstKind(batch), true, func() ([]store.Record, error) { return j.Journal.Append(ctx, epoch, batch) })
}

// Seal fails on schedule.
func (j *Journal) Seal(ctx context.Context, run store.RunID, epoch store.Epoch, outcome string) (store.Digest, error) {
	return do(ctx, j, "Seal", true, func() (store.Digest, error) { return j.Journal.Seal(ctx, run, epoch, outcome) })
}

// Acquire fails on schedule.
func (j *Journal) Acquire(ctx context.Context, run store.RunID, owner string, ttl time.Duration) (store.Lease, error) {
	return do(ctx, j, "Acquire", true, func() (store.Lease, error) { return j.Journal.Acquire(ctx, run, owner, ttl) })
}

// Renew fails on schedule.
func (j *Journal) Renew(ctx context.Context, run store.RunID, owner string, epoch store.Epoch, ttl time.Duration) (store.Lease, error) {
	return do(ctx, j, "Renew", true, func() (store.Lease, error) { return j.Journal.Renew(ctx, run, owner, epoch, ttl) })
}

// ReleaseLease fails on schedule.
func (j *Journal) ReleaseLease(ctx context.Context, run store.RunID, epoch store.Epoch) error {
	return doErr(ctx, j, "ReleaseLease", true, func() error { return j.Journal.ReleaseLease(ctx, run, epoch) })
}

// RequestCancel fails on schedule.
func (j *Journal) RequestCancel(ctx context.Context, run store.RunID, actor store.Operator, reason string) (bool, error) {
	return do(ctx, j, "RequestCancel", true, func() (bool, error) { return j.Journal.RequestCancel(ctx, run, actor, reason) })
}

// Read fails on schedule.
func (j *Journal) Read(ctx context.Context, run store.RunID, from store.Seq) ([]store.Record, error) {
	return do(ctx, j, "Read", false, func() ([]store.Record, error) { return j.Journal.Read(ctx, run, from) })
}

// ReadPage fails on schedule.
func (j *Journal) ReadPage(ctx context.Context, run store.RunID, from store.Seq, limit int) ([]store.Record, error) {
	return do(ctx, j, "ReadPage", false, func() ([]store.Record, error) { return j.Journal.ReadPage(ctx, run, from, limit) })
}

// ReadStored fails on schedule.
func (j *Journal) ReadStored(ctx context.Context, run store.RunID, from store.Seq, limit, maxBytes int) ([]store.Record, store.Seq, error) {
	var next store.Seq
	recs, err := do(ctx, j, "ReadStored", false, func() (recs []store.Record, err error) {
		recs, next, err = j.Journal.ReadStored(ctx, run, from, limit, maxBytes)
		return recs, err
	})
	return recs, next, err
}

// Head fails on schedule.
func (j *Journal) Head(ctx context.Context, run store.RunID) (store.Head, error) {
	return do(ctx, j, "Head", false, func() (store.Head, error) { return j.Journal.Head(ctx, run) })
}

// Verify fails on schedule.
func (j *Journal) Verify(ctx context.Context, run store.RunID) (store.Digest, error) {
	return do(ctx, j, "Verify", false, func() (store.Digest, error) { return j.Journal.Verify(ctx, run) })
}

// SaveCheckpoint fails on schedule (publishers and signers write here).
func (j *Journal) SaveCheckpoint(ctx context.Context, sc store.SignedCheckpoint) (store.SignedCheckpoint, error) {
	return do(ctx, j, "SaveCheckpoint", true, func() (store.SignedCheckpoint, error) { return j.Delegate.SaveCheckpoint(ctx, sc) })
}

// Atomic wraps the inner transaction with the same schedule.
func (j *Journal) Atomic() store.AtomicJournal {
	a := j.Journal.Atomic()
	if a == nil {
		return nil
	}
	return atomicJournal{j: j, inner: a}
}

type atomicJournal struct {
	j     *Journal
	inner store.AtomicJournal
}

// AppendAtomic fails on schedule; FailInTx fails from inside the inner
// transaction once work has run, so that what work wrote rolls back.
func (a atomicJournal) AppendAtomic(ctx context.Context, r store.RunID, epoch store.Epoch, work func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error)) ([]store.Record, error) {
	c := a.j.next("AppendAtomic", "", true)
	inTx := c.fault == FailInTx
	if inTx {
		c.fault = None // the transaction runs; the fault is injected from inside
	}
	recs, err := perform(ctx, c, func() ([]store.Record, error) {
		return a.inner.AppendAtomic(ctx, r, epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
			batch, err := work(ctx, tx)
			c.detail(firstKind(batch))
			if err != nil {
				return batch, err
			}
			if inTx {
				return nil, c.err
			}
			return batch, nil
		})
	})
	return recs, err
}

// Shared answers IsShared() == true over a store that is not, and
// delegates everything else, so that the refusal of configurations unsafe
// on a shared store can be tested without a shared database.
type Shared struct {
	store.Journal
	optional.Delegate
}

// NewShared wraps inner.
func NewShared(inner store.Journal) *Shared {
	return &Shared{Journal: inner, Delegate: optional.Delegate{Inner: inner}}
}

// IsShared is true: the double pretends several processes write it.
func (*Shared) IsShared() bool { return true }

// BulkStore is a journal that also writes many runs per transaction.
type BulkStore interface {
	store.Journal
	store.BulkWriter
}

// BulkJournal is a Journal over a BulkStore: its bulk writes (methods
// "AppendBulk" and "SealBulk") fail on the same schedule. It is a separate
// type so that a Journal never claims store.BulkWriter over a store
// without it.
type BulkJournal struct {
	*Journal
	bulk store.BulkWriter
}

var _ store.BulkWriter = (*BulkJournal)(nil)

// NewBulk wraps inner with the schedule o.
func NewBulk(inner BulkStore, o Options) *BulkJournal {
	return &BulkJournal{Journal: New(inner, o), bulk: inner}
}

// AppendBulk fails on schedule.
func (j *BulkJournal) AppendBulk(ctx context.Context, a []store.BulkAppend) ([][]store.Record, error) {
	return do(ctx, j.Journal, "AppendBulk", true, func() ([][]store.Record, error) { return j.bulk.AppendBulk(ctx, a) })
}

// SealBulk fails on schedule.
func (j *BulkJournal) SealBulk(ctx context.Context, s []store.BulkSeal) ([]store.Digest, error) {
	return do(ctx, j.Journal, "SealBulk", true, func() ([]store.Digest, error) { return j.bulk.SealBulk(ctx, s) })
}
