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
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

// ErrInjected classes every failure this package makes up.
var ErrInjected = errors.New("injected fault")

// InjectedError is a made-up failure, with what is needed to replay it.
type InjectedError struct {
	Fault  Fault
	Op     uint64 // the operation's number, from 1
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
	FailBeforeCommit, LoseAck, Slow, Close float64
	// At forces the fault of given operation numbers, over the rates.
	At map[uint64]Fault
	// Only restricts faults to these methods (nil: every faultable one).
	Only []string
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
	log    []Injected
}

// Injected is one fault as it happened.
type Injected struct {
	Op     uint64
	Method string
	Fault  Fault
}

var _ store.Journal = (*Journal)(nil)

// New wraps inner with the schedule o.
func New(inner store.Journal, o Options) *Journal {
	if o.SlowFor == 0 {
		o.SlowFor = 50 * time.Millisecond
	}
	return &Journal{Journal: inner, Delegate: optional.Delegate{Inner: inner}, o: o,
		rng: rand.New(rand.NewPCG(o.Seed, 0x72756e7365616c))}
}

// Seed is the schedule's seed, for failure messages of tests using it.
func (j *Journal) Seed() uint64 { return j.o.Seed }

// Injected lists the faults injected so far, in operation order.
func (j *Journal) Injected() []Injected {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Injected(nil), j.log...)
}

// next numbers an operation and draws its fault. Every operation draws,
// faulted or not, so operation n's fault depends only on the seed and n.
func (j *Journal) next(method string, write bool) (Fault, *InjectedError) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.n++
	x := j.rng.Float64()
	if j.closed {
		return Closed, &InjectedError{Fault: Closed, Op: j.n, Method: method, Seed: j.o.Seed}
	}
	f, forced := j.o.At[j.n]
	if !forced {
		switch {
		case x < j.o.FailBeforeCommit:
			f = FailBeforeCommit
		case x < j.o.FailBeforeCommit+j.o.LoseAck:
			f = LoseAck
		case x < j.o.FailBeforeCommit+j.o.LoseAck+j.o.Slow:
			f = Slow
		case x < j.o.FailBeforeCommit+j.o.LoseAck+j.o.Slow+j.o.Close:
			f = Closed
		}
	}
	if f != None && j.o.Only != nil && !contains(j.o.Only, method) {
		f = None
	}
	if f == LoseAck && !write {
		f = FailBeforeCommit // a read has no acknowledgement to lose
	}
	if f == None {
		return None, nil
	}
	if f == Closed {
		j.closed = true
	}
	j.log = append(j.log, Injected{Op: j.n, Method: method, Fault: f})
	return f, &InjectedError{Fault: f, Op: j.n, Method: method, Seed: j.o.Seed}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// do runs call under the operation's fault.
func do[T any](ctx context.Context, j *Journal, method string, write bool, call func() (T, error)) (T, error) {
	var zero T
	f, ie := j.next(method, write)
	switch f {
	case FailBeforeCommit, Closed:
		return zero, ie
	case Slow:
		t := time.NewTimer(j.o.SlowFor)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-t.C:
		}
	case LoseAck:
		if _, err := call(); err != nil {
			return zero, err // it did not commit: the caller hears why
		}
		return zero, &store.CommitUnknownError{Detail: ie.Error(), Err: ie}
	}
	return call()
}

// Append fails on schedule.
func (j *Journal) Append(ctx context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	return do(ctx, j, "Append", true, func() ([]store.Record, error) { return j.Journal.Append(ctx, epoch, batch) })
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
	_, err := do(ctx, j, "ReleaseLease", true, func() (struct{}, error) { return struct{}{}, j.Journal.ReleaseLease(ctx, run, epoch) })
	return err
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

func (a atomicJournal) AppendAtomic(ctx context.Context, run store.RunID, epoch store.Epoch, work func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error)) ([]store.Record, error) {
	return do(ctx, a.j, "AppendAtomic", true, func() ([]store.Record, error) { return a.inner.AppendAtomic(ctx, run, epoch, work) })
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
