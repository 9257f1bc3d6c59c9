// Package groupcommit shares one commit among concurrent writes: callers
// Submit a request and wait; committer goroutines take the requests waiting
// when they come free, up to a maximum, and hand them as one group to an
// Attempt that writes them in one transaction, so a group pays for one
// durable flush instead of one per caller.
//
// Invariants a user relies on:
//
//   - Every submitted member is answered exactly once, and Submit returns
//     only with that answer (or with ErrClosed or its context's error when
//     the member never entered a group, in which case nothing was written).
//     A caller whose context is cancelled after its member was taken still
//     waits: it must learn whether its write landed.
//   - A member whose context is done when its turn comes is answered with
//     the context's error and is not attempted.
//   - Members are taken in the order they were submitted. Two members that
//     claim a common key (Config.Keys) never share a group or run in two
//     groups at once: the later one waits, in order, for a later group.
//   - An Attempt answers the members it can and returns the rest to be tried
//     again in a fresh transaction, so one member's failure is its own; an
//     attempt that answers nobody counts as a failure, and after
//     Config.MaxAttempts of them in a row the remaining members are
//     answered with the last error.
//   - Close drains: every member submitted before it is answered before
//     Close returns, or, when the Attempt defers answers (SQL.Durable,
//     Config.Pipelined), handed to whatever will answer it.
//
// The package knows nothing of what is written; SQL adapts it to
// database/sql transactions with one savepoint per member.
package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"
)

// ErrClosed is Submit's answer after Close: the request was not written.
var ErrClosed = errors.New("groupcommit: closed")

// A Member is one caller's request waiting for, or in, a group.
type Member[T any] struct {
	// Ctx is the caller's context. An Attempt should not let its
	// cancellation abort a transaction other members share.
	Ctx context.Context
	// Req is the caller's request.
	Req T

	keys  []string
	done  chan error
	taken bool // under Queue.mu: in a group, no longer removable
	q     *Queue[T]
}

// Answer gives the member its result. An Attempt answers each member it
// does not return for retry exactly once.
func (m *Member[T]) Answer(err error) {
	if m.q != nil && m.q.cfg.Pipelined {
		m.q.mu.Lock()
		m.q.unanswered--
		m.q.mu.Unlock()
		m.q.cond.Broadcast()
	}
	m.done <- err
}

// An Attempt writes pending in one transaction. It answers every member it
// can and returns, in their order, the members to try again, with the
// failure that sent them back.
type Attempt[T any] func(pending []*Member[T]) (retry []*Member[T], err error)

// Config configures a Queue.
type Config[T any] struct {
	// Attempt writes one group. Required.
	Attempt Attempt[T]
	// Keys, if set, names what a request claims (a run, a unique key):
	// members sharing a key are never in flight together.
	Keys func(T) []string
	// MaxGroup caps the members of one group; 256 when zero.
	MaxGroup int
	// Committers is how many groups may be in flight at once; 1 when zero.
	Committers int
	// MaxAttempts caps the attempts in a row that answer nobody; 0 means
	// no cap. The first attempt of a group that returns every member with
	// a nil error is free: it may send its group back once to write it
	// another way.
	MaxAttempts int
	// Backoff, if set, is how long to wait after the n-th failed attempt.
	Backoff func(n int) time.Duration
	// Pipelined says that an Attempt may return before it answers its
	// members (their answers wait for a flush that overlaps the next
	// group). The committer then takes at most half of the members
	// submitted and not yet answered, so that the callers settle into two
	// cohorts that take turns: one group executes while the other's flush
	// runs. Without the cap every caller would be in the group being
	// flushed, and the next group would wait for it, or hold only the
	// stragglers.
	Pipelined bool
}

// A Queue is a running group commit. It is safe for concurrent use.
type Queue[T any] struct {
	cfg     Config[T]
	mu      sync.Mutex
	cond    *sync.Cond
	waiting []*Member[T]
	busy    map[string]int // keys of members in flight
	// unanswered counts the members taken and not yet answered (kept
	// when Pipelined only).
	unanswered int
	closed     bool
	wg         sync.WaitGroup
}

// New starts a Queue's committers.
func New[T any](cfg Config[T]) *Queue[T] {
	if cfg.MaxGroup <= 0 {
		cfg.MaxGroup = 256
	}
	if cfg.Committers <= 0 {
		cfg.Committers = 1
	}
	q := &Queue[T]{cfg: cfg, busy: map[string]int{}}
	q.cond = sync.NewCond(&q.mu)
	for range cfg.Committers {
		q.wg.Add(1)
		go q.committer()
	}
	return q
}

// Submit queues req and waits for its answer. If ctx is done before the
// request is taken into a group, Submit withdraws it and returns ctx's
// error; once taken, it waits for the answer whatever ctx does.
func (q *Queue[T]) Submit(ctx context.Context, req T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := &Member[T]{Ctx: ctx, Req: req, done: make(chan error, 1), q: q}
	if q.cfg.Keys != nil {
		m.keys = q.cfg.Keys(req)
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.waiting = append(q.waiting, m)
	q.mu.Unlock()
	q.cond.Signal()
	select {
	case err := <-m.done:
		return err
	case <-ctx.Done():
	}
	q.mu.Lock()
	if !m.taken {
		if i := slices.Index(q.waiting, m); i >= 0 {
			q.waiting = slices.Delete(q.waiting, i, i+1)
			q.mu.Unlock()
			return ctx.Err()
		}
	}
	q.mu.Unlock()
	return <-m.done
}

// Waiting reports how many members wait to be taken into a group (a gauge
// for metrics, and a way for tests to know a group is queued).
func (q *Queue[T]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// Close stops the committers once every member already submitted has its
// answer; Submit then returns ErrClosed.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
	q.wg.Wait()
}

func (q *Queue[T]) committer() {
	defer q.wg.Done()
	last := 0
	for {
		if q.cfg.Pipelined {
			last = q.balance(last)
		}
		q.gather(last)
		group := q.take()
		if group == nil {
			return
		}
		q.commit(group)
		// Expect the members just answered back beside those already
		// waiting: two cohorts that take turns (one waits while the other
		// commits) merge into one, which pays one flush instead of two.
		last = q.expect(len(group))
		if q.cfg.Keys != nil {
			q.mu.Lock()
			for _, m := range group {
				for _, k := range m.keys {
					if q.busy[k]--; q.busy[k] == 0 {
						delete(q.busy, k)
					}
				}
			}
			q.mu.Unlock()
			q.cond.Broadcast() // members held back by these keys may go
		}
	}
}

// expect is how many members the next group should gather, after a group
// of n: the members just answered beside those already waiting.
func (q *Queue[T]) expect(n int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return n + len(q.waiting)
}

// balance, when pipelined, waits while fewer members wait than are taken
// and unanswered (in the group being flushed): taking the few that came
// first would cut the cohort that flush is about to release into small
// groups, each paying a transaction and a flush. It returns how many to
// gather: those waiting when a flush is still in flight (the cohort is
// complete), or want when everyone has been answered (they are coming back).
func (q *Queue[T]) balance(want int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.closed && q.unanswered > 0 && len(q.waiting) < q.unanswered {
		q.cond.Wait()
	}
	if q.unanswered > 0 {
		return len(q.waiting)
	}
	return want
}

// gather lets the members a commit has just answered queue again before
// the next group is taken: it yields the processor while members keep
// arriving, until want are waiting. Without it the committer, which runs on
// as soon as it has answered its group, takes the one or two members that
// were quickest back, and the rest wait a whole commit for the group after:
// groups alternate small and large, and a durable flush is spent on a few
// members. It never waits for a member that is not on its way (no arrival
// during a yield ends it), so a lone caller loses no time.
func (q *Queue[T]) gather(want int) {
	idle := 0
	for range 2 * want {
		q.mu.Lock()
		n := len(q.waiting)
		q.mu.Unlock()
		if n >= want {
			return
		}
		runtime.Gosched()
		q.mu.Lock()
		m := len(q.waiting)
		q.mu.Unlock()
		if m > n {
			idle = 0
		} else if idle++; idle == 2 {
			return
		}
	}
}

// take waits for the next group: the waiting members, in order, that claim
// no key in flight and none claimed earlier in the group. It returns nil
// when the queue is closed and nothing is left.
func (q *Queue[T]) take() []*Member[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		var group []*Member[T]
		limit := q.cfg.MaxGroup
		rest := q.waiting[:0]
		for _, m := range q.waiting {
			if len(group) < limit && q.free(m) {
				q.claim(m)
				m.taken = true
				if q.cfg.Pipelined {
					q.unanswered++
				}
				group = append(group, m)
			} else {
				rest = append(rest, m)
			}
		}
		clear(q.waiting[len(rest):])
		q.waiting = rest
		if len(group) > 0 {
			return group
		}
		if q.closed && len(q.waiting) == 0 {
			return nil
		}
		q.cond.Wait()
	}
}

func (q *Queue[T]) free(m *Member[T]) bool {
	for _, k := range m.keys {
		if q.busy[k] > 0 {
			return false
		}
	}
	return true
}

func (q *Queue[T]) claim(m *Member[T]) {
	for _, k := range m.keys {
		q.busy[k]++
	}
}

// commit runs attempts until every member of group has its answer.
func (q *Queue[T]) commit(group []*Member[T]) {
	pending := group
	fails, free := 0, true
	for len(pending) > 0 {
		live := pending[:0:0]
		for _, m := range pending {
			if err := m.Ctx.Err(); err != nil {
				m.Answer(err)
				continue
			}
			live = append(live, m)
		}
		if len(live) == 0 {
			return
		}
		retry, err := q.cfg.Attempt(live)
		if len(retry) == len(live) {
			if err == nil && free {
				free = false
			} else {
				fails++
				if q.cfg.MaxAttempts > 0 && fails >= q.cfg.MaxAttempts {
					if err == nil {
						err = errors.New("groupcommit: attempt made no progress")
					}
					for _, m := range retry {
						m.Answer(err)
					}
					return
				}
				if q.cfg.Backoff != nil {
					time.Sleep(q.cfg.Backoff(fails))
				}
			}
		}
		pending = retry
	}
}
