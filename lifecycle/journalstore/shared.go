package journalstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/store"
)

// ErrMoved is the cause (inside a lifecycle.KindStorage error) of a write
// refused because the run it appends to moved after the storage decided
// what to write: on a shared store, the study's lock was lost (its
// connection died) and another process wrote the study. Nothing was
// written; the study's view is discarded and rebuilt by its next operation.
var ErrMoved = errors.New("the run moved under this storage: the study's lock was lost")

// MovedError is the data of ErrMoved: the run, the head the storage folded
// and the head the transaction found.
type MovedError struct {
	Run            store.RunID
	Folded, Actual store.Head
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("run %s: folded up to seq %d, but its head is seq %d: %v", e.Run, e.Folded.Seq, e.Actual.Seq, ErrMoved)
}

// Unwrap returns ErrMoved.
func (e *MovedError) Unwrap() error { return ErrMoved }

// keyLocker is a shared store's advisory lock per key
// (store/postgres.Store.LockKey): held until the returned Closer closes,
// dropped by the server if the holder's connection dies.
type keyLocker interface {
	LockKey(ctx context.Context, key string) (io.Closer, error)
}

// lockCapacity bounds how many locks a process holds at once
// (store/postgres.Store.LockCapacity), so that holders waiting for a
// connection cannot starve the holder that has the lock.
type lockCapacity interface {
	LockCapacity() int
}

// headsReader reads many runs' heads in one query
// (store/postgres.Store.Heads).
type headsReader interface {
	Heads(ctx context.Context, runs []store.RunID) ([]store.Head, error)
}

// headChecker is the slice of a store's atomic transaction that reads a
// run's head inside it (store/postgres's AtomicTx).
type headChecker interface {
	Head(ctx context.Context, run store.RunID) (store.Head, error)
}

// shared is how a Storage writes a journal that several processes write:
// each study's operations hold the study's advisory lock, the view is
// brought up to date from the journal under it, and every append commits
// only if its run's head, read inside the append's transaction under the
// run's row lock, is the head the view folded (spec/lifecycle.md 14.2).
type shared struct {
	atomic store.AtomicJournal
	locks  keyLocker
	heads  headsReader // nil: one Head call per run
	sem    chan struct{}
}

// newShared finds the shared-store capabilities of j, or refuses it.
func newShared(op string, j Journal) (*shared, error) {
	a := j.Atomic()
	var locks keyLocker
	var heads headsReader
	capacity := 4
	for x := j; x != nil && locks == nil; x = inner(x) {
		if l, ok := x.(keyLocker); ok {
			locks = l
			heads, _ = x.(headsReader)
			if c, ok := x.(lockCapacity); ok {
				capacity = c.LockCapacity()
			}
		}
	}
	if a == nil || locks == nil {
		return nil, lifecycle.NewError(lifecycle.KindUnsupported, op, "the journal is shared by several processes but offers no atomic transaction (Atomic) or no advisory lock (LockKey): JournalStorage cannot check a study's authority in the transaction that writes it")
	}
	return &shared{atomic: a, locks: locks, heads: heads, sem: make(chan struct{}, max(1, capacity))}, nil
}

// lock takes the study's advisory lock for st, which the caller has
// locked in this process.
func (sh *shared) lock(ctx context.Context, st *jstudy) error {
	select {
	case sh.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	l, err := sh.locks.LockKey(ctx, "lifecycle/study/"+string(st.id))
	if err != nil {
		<-sh.sem
		return err
	}
	st.held = l
	st.release = func() { <-sh.sem }
	return nil
}

// unlock releases what lockStudy took: the study's advisory lock, if held,
// then its lock in this process. An advisory unlock that fails closed the
// connection, which released the lock; every write was checked anyway.
func (st *jstudy) unlock() {
	if st.held != nil {
		_ = st.held.Close()
		st.held = nil
		st.release()
	}
	st.mu.Unlock()
}

// appendAt appends batch to run under epoch, with the derived rows the
// batch changes (at the run's seq after it) in the same transaction. On a
// shared store, and whenever rows are written, it commits only if the
// run's head is still head, which the caller folded and decided from.
func (s *Storage) appendAt(ctx context.Context, run store.RunID, head store.Head, epoch store.Epoch, batch []store.Append, rows []derivedRow) ([]store.Record, error) {
	if s.shared == nil && len(rows) == 0 {
		return s.j.Append(ctx, epoch, batch)
	}
	at := head.Seq + store.Seq(len(batch))
	return s.atomic.AppendAtomic(ctx, run, epoch, func(ctx context.Context, tx store.AtomicTx) ([]store.Append, error) {
		hc, ok := tx.(headChecker)
		if !ok {
			return nil, errors.New("the store's atomic transaction cannot read a run's head")
		}
		h, err := hc.Head(ctx, run)
		if err != nil {
			return nil, err
		}
		if h != head {
			return nil, &MovedError{Run: run, Folded: head, Actual: h}
		}
		if err := putRows(ctx, s.rows, tx, at, rows); err != nil {
			return nil, err
		}
		return batch, nil
	})
}

// refresh brings a loaded view up to date under the study's advisory lock,
// reading only what was appended after it: the study run's records past
// its folded head, then the records past the folded head of each trial
// run that can still change (not concluded), found with one heads read.
// Records appended by another process fold exactly as the ones this one
// appends; the transitions they left unfinished are settled next.
func (s *Storage) refresh(ctx context.Context, v *jview) error {
	if err := readTail(ctx, s.j, v.run, v.head.Seq, v.applyStudy); err != nil {
		return err
	}
	var live []*jtrial
	runs := []store.RunID{}
	for _, t := range v.order {
		if !t.concluded {
			live = append(live, t)
			runs = append(runs, t.run)
		}
	}
	heads, err := s.headsOf(ctx, runs)
	if err != nil {
		return err
	}
	for i, t := range live {
		if heads[i] == t.head {
			continue
		}
		if err := readTail(ctx, s.j, t.run, t.head.Seq, func(r store.Record) error { return v.applyTrial(t, r) }); err != nil {
			return err
		}
	}
	return nil
}

// readTail folds run's records after seq, a page at a time.
func readTail(ctx context.Context, j Journal, run store.RunID, seq store.Seq, fold func(store.Record) error) error {
	for {
		recs, err := j.ReadPage(ctx, run, seq+1, store.MaxLimit)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fold(r); err != nil {
				return err
			}
			seq = r.Seq
		}
		if len(recs) < store.MaxLimit {
			return nil
		}
	}
}

func (s *Storage) headsOf(ctx context.Context, runs []store.RunID) ([]store.Head, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	if s.shared != nil && s.shared.heads != nil {
		hs, err := s.shared.heads.Heads(ctx, runs)
		if err == nil && len(hs) != len(runs) {
			err = fmt.Errorf("heads: %d answers for %d runs", len(hs), len(runs))
		}
		return hs, err
	}
	hs := make([]store.Head, len(runs))
	for i, r := range runs {
		h, err := s.j.Head(ctx, r)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	return hs, nil
}

// Journal is what a Storage uses of a journal store: the append, read,
// lease and seal roles, the case and source indexes a study is found by,
// and the facts that choose how it writes (IsShared, Atomic, Tenant).
// store.Journal (store/sqlite, store/postgres, their decorators) has it.
type Journal interface {
	store.Appender
	store.Reader
	store.Leaser
	store.Sealer
	// LogPositions tells which concluded trial runs are sealed.
	LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error)
	// CaseRuns lists a study's runs, to check the case index.
	CaseRuns(ctx context.Context, c store.CaseID, after *store.RunID, limit int) ([]store.RunID, error)
	// RecentRunsFrom lists the study runs.
	RecentRunsFrom(ctx context.Context, source string, after *store.Activity, limit int) ([]store.Activity, error)
	IsShared() bool
	Tenant() string
	Atomic() store.AtomicJournal
}
