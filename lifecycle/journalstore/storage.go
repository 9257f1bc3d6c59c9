package journalstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// Storage implements [lifecycle.Storage] and [lifecycle.Inspector] on a journal store
// (package store): a study is a case, each trial a run, owner epochs are
// the trial runs' lease epochs, every transition is a journal record
// written under the fence, the outbox and the finalization claim are
// derived from records, and a trial's terminal outcome seals its run, so a
// study can be exported, disclosed and verified like any other runs.
// spec/lifecycle.md section 14 is the normative description.
//
// Each study has a study run (its id is the case's ULID) holding the
// records that are the authority for the study's budget, reservations,
// finalization claim, outbox, study-scope state and every trial's end. A
// transition that touches two runs writes the study run's record first
// (its commit point) and then the trial run's mirror of it; a view rebuilt
// after a crash between the two completes the mirror before anything else
// happens to the study.
//
// Storage serializes the operations on each study and keeps a view
// of it derived from the journal (rebuilt on first use in a process). Each
// operation validates against the view, appends its records under the
// trial's fence, and updates the view by folding exactly the records it
// appended. Any failure after a write began discards the view, which is
// rebuilt from the journal before the study's next operation.
//
// On a store one process writes (SQLite) that serialization is in this
// process only, so a Storage must be the only writer of its journal
// tenant's lifecycle records, and it enforces it: it holds an exclusive OS
// lock beside the journal's file until Close, so a second JournalStorage
// on the same file and tenant, in this process or another, is refused
// with [ErrLocked]. On a shared store (PostgreSQL) the serialization is
// the study's advisory lock in the database, the view is brought up to
// date under it, and each append is checked against the run's head in its
// own transaction (see [New]). Memory grows with the studies used: each
// study's view stays loaded.
type Storage struct {
	j      Journal
	shared *shared // nil for a store one process writes
	// atomic is j's transaction that derived rows join, and rows the
	// derived rows the listings are read from (listing.go); both nil when
	// j has none, and the listings are then read from the view.
	atomic store.AtomicJournal
	rows   rowStore

	lock   io.Closer    // the one-writer lock; nil for an in-memory journal
	closed atomic.Bool  // set by Close; operations then fail
	life   sync.RWMutex // writers outside a study's lock hold it shared; Close exclusive

	mu         sync.Mutex
	studies    map[lifecycle.StudyID]*jstudy
	trialStudy map[lifecycle.TrialID]lifecycle.StudyID
}

// jstudy is one study's serialization point and view.
type jstudy struct {
	mu     sync.Mutex
	id     lifecycle.StudyID
	caseID store.CaseID
	v      *jview // nil: not loaded, or discarded after a failed write
	// listed is the study run seq the study's derived rows are known to
	// reflect; 0 until checked.
	listed store.Seq
	// held is the study's advisory lock on a shared store, held from
	// lockStudy to unlock, and release frees its slot.
	held    io.Closer
	release func()
}

var _ interface {
	lifecycle.Storage
	lifecycle.Inspector
} = (*Storage)(nil)

// New returns a Storage writing to j.
//
// On a store that several processes write (j.IsShared(), PostgreSQL), each
// study's operations hold the study's advisory lock, bring the view up to
// date from the journal under it, and append through j.Atomic() so that
// each append commits only if its run is still where the view folded it
// (spec/lifecycle.md 14.2): any number of Storages, in any processes, may
// serve one journal tenant. A shared store without Atomic() or an advisory
// lock (a LockKey method, as store/postgres.Store has, found through
// wrappers' Unwrap() or Inner()) is refused with KindUnsupported.
//
// On a store one process writes (SQLite), the study's serialization is in
// this process, so New holds the journal tenant's one-writer lock (an OS
// lock beside the journal's file) until Close: a second Storage on the
// same file and tenant, in this process or another, is refused with a
// KindConflict error that is also [ErrLocked] and carries a
// [*LockedError]; and a journal that is not a local file (nor wraps one)
// is refused with KindUnsupported, since it could not enforce the rule.
func New(j Journal) (*Storage, error) {
	const op = "new_journal_storage"
	if j == nil {
		return nil, lifecycle.NewError(lifecycle.KindInvalid, op, "no journal")
	}
	s := &Storage{j: j, studies: map[lifecycle.StudyID]*jstudy{}, trialStudy: map[lifecycle.TrialID]lifecycle.StudyID{}}
	if s.atomic = j.Atomic(); s.atomic != nil {
		s.rows = findRows(j)
	}
	if j.IsShared() {
		sh, err := newShared(op, j)
		if err != nil {
			return nil, err
		}
		s.shared = sh
		return s, nil
	}
	lock, err := takeWriterLock(context.Background(), op, j)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// Close waits for the operations in progress, releases the one-writer
// lock and makes every later operation fail (KindStorage). It does not
// close the journal, which the caller opened.
func (s *Storage) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	studies := slices.Collect(maps.Values(s.studies))
	s.mu.Unlock()
	for _, st := range studies {
		st.mu.Lock()
		st.v = nil
		st.unlock()
	}
	if s.lock == nil {
		return nil
	}
	return s.lock.Close()
}

// ErrClosed is the cause (inside a lifecycle.KindStorage error) of every
// operation on a Storage after Close.
var ErrClosed = errors.New("the lifecycle storage is closed")

func journalError(op string, err error) error {
	var ce *InconsistentError
	if errors.As(err, &ce) {
		return &lifecycle.Error{Kind: lifecycle.KindStorage, Op: op, Detail: "the journal's lifecycle records are inconsistent", Err: err}
	}
	return lifecycle.StorageError(op, err)
}

// openStudy returns the study locked, with a current view.
func (s *Storage) openStudy(ctx context.Context, op string, id lifecycle.StudyID) (*jstudy, error) {
	c, err := store.ParseCaseID(string(id))
	if err != nil || c.IsZero() || c.String() != string(id) {
		return nil, lifecycle.NewError(lifecycle.KindNotFound, op, "study %q", id)
	}
	st, err := s.lockStudy(ctx, op, id, c)
	if err != nil {
		return nil, err
	}
	if st.v != nil && s.shared != nil {
		if err := s.refresh(ctx, st.v); err == nil {
			err = s.settle(ctx, st.v)
		}
		if err != nil {
			st.v = nil
			st.unlock()
			return nil, journalError(op, err)
		}
	}
	if st.v == nil {
		v, err := s.rebuild(ctx, op, c)
		if err != nil {
			st.unlock()
			if lifecycle.KindOf(err) == lifecycle.KindNotFound {
				s.mu.Lock()
				if s.studies[id] == st {
					delete(s.studies, id)
				}
				s.mu.Unlock()
			}
			return nil, err
		}
		st.v = v
		// A study loaded has its rows checked (and rebuilt if behind)
		// once; after that its own writes keep them current, and so do
		// other processes' (a listing that finds them behind has them
		// rebuilt, currentRow).
		if err := s.syncRows(ctx, st); err != nil {
			st.unlock()
			return nil, journalError(op, err)
		}
	}
	return st, nil
}

// lockStudy returns the study's serialization point locked, loaded or not:
// in this process, and on a shared store also by the study's advisory lock.
func (s *Storage) lockStudy(ctx context.Context, op string, id lifecycle.StudyID, c store.CaseID) (*jstudy, error) {
	s.mu.Lock()
	st := s.studies[id]
	if st == nil {
		st = &jstudy{id: id, caseID: c}
		s.studies[id] = st
	}
	s.mu.Unlock()
	st.mu.Lock()
	if s.closed.Load() {
		st.unlock()
		return nil, lifecycle.StorageError(op, ErrClosed)
	}
	if s.shared != nil {
		if err := s.shared.lock(ctx, st); err != nil {
			st.unlock()
			return nil, lifecycle.StorageError(op, fmt.Errorf("lock study %s: %w", id, err))
		}
	}
	return st, nil
}

// studyOf finds the study of a trial: from memory, or from the trial run's
// first record, which carries the case.
func (s *Storage) studyOf(ctx context.Context, op string, id lifecycle.TrialID) (lifecycle.StudyID, error) {
	s.mu.Lock()
	sid, ok := s.trialStudy[id]
	s.mu.Unlock()
	if ok {
		return sid, nil
	}
	run, err := store.ParseRunID(string(id))
	if err != nil || run.IsZero() || run.String() != string(id) {
		return "", lifecycle.NewError(lifecycle.KindNotFound, op, "trial %q", id)
	}
	recs, err := s.j.ReadPage(ctx, run, 1, 1)
	if err != nil {
		return "", journalError(op, err)
	}
	if len(recs) == 0 || !admittedFrom(recs[0], TrialSource) {
		return "", lifecycle.NewError(lifecycle.KindNotFound, op, "trial %q", id)
	}
	return lifecycle.StudyID(recs[0].Case.String()), nil
}

// admittedFrom reports whether r is a RunAdmitted from source, stamped
// with a case.
func admittedFrom(r store.Record, source string) bool {
	if r.Kind != store.KindRunAdmitted || r.Seq != 1 || r.Case.IsZero() {
		return false
	}
	var f fRunAdmitted
	return json.Unmarshal(r.Fields, &f) == nil && f.Source == source
}

// openTrial returns the trial's study locked, with a current view, and the
// trial.
func (s *Storage) openTrial(ctx context.Context, op string, id lifecycle.TrialID) (*jstudy, *jtrial, error) {
	sid, err := s.studyOf(ctx, op, id)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.openStudy(ctx, op, sid)
	if lifecycle.KindOf(err) == lifecycle.KindNotFound {
		return nil, nil, lifecycle.NewError(lifecycle.KindNotFound, op, "trial %q", id)
	}
	if err != nil {
		return nil, nil, err
	}
	t := st.v.byID[id]
	if t == nil {
		st.unlock()
		return nil, nil, lifecycle.NewError(lifecycle.KindNotFound, op, "trial %q", id)
	}
	return st, t, nil
}

func (s *Storage) openManaged(ctx context.Context, op string, id lifecycle.TrialID) (*jstudy, *jtrial, error) {
	st, t, err := s.openTrial(ctx, op, id)
	if err == nil && !t.Managed {
		st.unlock()
		return nil, nil, lifecycle.NewError(lifecycle.KindUnsupported, op, "trial %q is not lifecycle-managed", id)
	}
	return st, t, err
}

// openOwned returns the trial if tok is exactly its current owner.
func (s *Storage) openOwned(ctx context.Context, op string, tok lifecycle.TrialOwnerToken) (*jstudy, *jtrial, error) {
	st, t, err := s.openManaged(ctx, op, tok.Trial)
	if err != nil {
		return nil, nil, err
	}
	if l := t.Lease; l.State != lifecycle.TrialRunning || l.Owner != tok.Owner || l.Epoch != tok.Epoch {
		st.unlock()
		return nil, nil, lifecycle.NewError(lifecycle.KindLeaseLost, op, "trial %q is %s under owner %q epoch %d; token is owner %q epoch %d",
			t.ID, l.State, l.Owner, l.Epoch, tok.Owner, tok.Epoch)
	}
	return st, t, nil
}

func (s *Storage) onTrial(study lifecycle.StudyID) func(lifecycle.TrialID) {
	return func(t lifecycle.TrialID) {
		s.mu.Lock()
		s.trialStudy[t] = study
		s.mu.Unlock()
	}
}

// CreateStudy creates a study: a case, and its study run holding the
// StudyOpened record. It stands in for the surrounding study storage.
func (s *Storage) CreateStudy(ctx context.Context, spec lifecycle.StudySpec) (lifecycle.StudyID, error) {
	const op = "create_study"
	if err := model.Begin(ctx, op); err != nil {
		return "", err
	}
	if err := spec.Validate(); err != nil {
		return "", model.WithOp(op, err)
	}
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed.Load() {
		return "", lifecycle.StorageError(op, ErrClosed)
	}
	c := store.NewCaseID()
	id := lifecycle.StudyID(c.String())
	run := studyRunID(c)
	admitted, err := encodeFields(fRunAdmitted{Source: StudySource})
	if err != nil {
		return "", lifecycle.StorageError(op, err)
	}
	opened, err := encodeFields(fStudyOpened{Format: journalFormat, Spec: spec})
	if err != nil {
		return "", lifecycle.StorageError(op, err)
	}
	// The study run's lease is never released: the study run is written
	// under this one epoch, and anyone else's append to it is fenced.
	l, err := s.j.Acquire(ctx, run, journalOwner, store.MaxTTL)
	if err != nil {
		return "", lifecycle.StorageError(op, err)
	}
	batch := []store.Append{
		{Run: run, Case: c, Kind: store.KindRunAdmitted, Fields: admitted},
		{Run: run, Case: c, Kind: RecordStudyOpened, Fields: opened},
	}
	// As every study run record, the two are folded before they are
	// written, so that the study's summary row commits with them.
	ps, err := precheck(op, store.Head{}, l.Epoch, batch, 0)
	if err != nil {
		return "", err
	}
	v := newView(c, s.onTrial(id))
	var rows []derivedRow
	for _, p := range ps {
		if err := v.applyStudy(p.Record); err != nil {
			return "", journalError(op, err)
		}
	}
	if s.rows != nil {
		sum, err := v.summaryRow()
		if err != nil {
			return "", lifecycle.StorageError(op, err)
		}
		rows = []derivedRow{sum}
	}
	recs, err := s.appendAt(ctx, run, store.Head{}, l.Epoch, batch, rows)
	if err == nil && len(recs) != len(ps) {
		err = fmt.Errorf("append of %d records returned %d", len(ps), len(recs))
	}
	if err != nil {
		return "", lifecycle.StorageError(op, err)
	}
	if recs[1].Hash != ps[1].Hash {
		// A sealing store wrote other bytes: fold what it wrote.
		v = newView(c, s.onTrial(id))
		for _, r := range recs {
			if err := v.applyStudy(r); err != nil {
				return "", journalError(op, err)
			}
		}
	}
	s.mu.Lock()
	s.studies[id] = &jstudy{id: id, caseID: c, v: v, listed: v.head.Seq}
	s.mu.Unlock()
	return id, nil
}

// CreateUnmanagedTrial creates a trial outside the lifecycle protocol, as
// plain study CRUD would: it consumes a trial number and is a run of the
// study's case, but every lifecycle operation addressed to it answers
// KindUnsupported.
func (s *Storage) CreateUnmanagedTrial(ctx context.Context, study lifecycle.StudyID, state lifecycle.TrialState) (lifecycle.TrialID, error) {
	const op = "create_unmanaged_trial"
	if err := model.Begin(ctx, op); err != nil {
		return "", err
	}
	if !state.Valid() {
		return "", lifecycle.NewError(lifecycle.KindInvalid, op, "unknown state %q", state)
	}
	st, err := s.openStudy(ctx, op, study)
	if err != nil {
		return "", err
	}
	defer st.unlock()
	id := lifecycle.TrialID(store.NewRunID().String())
	if err := s.transition(ctx, op, st, RecordTrialReserved, fTrialReserved{Trial: id, Number: st.v.Study.Trials, Managed: false, State: state}); err != nil {
		return "", err
	}
	return id, nil
}

// Studies lists the studies of the journal: the runs admitted from
// StudySource, which is the journal's source index, and the studies this
// value holds. A run listed there that does not open as a study is left
// out by the operations that load them.
func (s *Storage) Studies(ctx context.Context) ([]lifecycle.StudyID, error) {
	const op = "studies"
	if err := model.Begin(ctx, op); err != nil {
		return nil, err
	}
	ids, err := journalStudies(ctx, s.j)
	if err != nil {
		return nil, lifecycle.StorageError(op, err)
	}
	s.mu.Lock()
	for id := range s.studies {
		ids[id] = true
	}
	s.mu.Unlock()
	return slices.Sorted(maps.Keys(ids)), nil
}

func journalStudies(ctx context.Context, j Journal) (map[lifecycle.StudyID]bool, error) {
	ids := map[lifecycle.StudyID]bool{}
	var after *store.Activity
	for {
		page, err := j.RecentRunsFrom(ctx, StudySource, after, store.MaxLimit)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return ids, nil
		}
		for _, a := range page {
			ids[lifecycle.StudyID(a.Run.String())] = true
		}
		after = &page[len(page)-1]
	}
}

// InspectStudy implements [lifecycle.Inspector].
func (s *Storage) InspectStudy(ctx context.Context, study lifecycle.StudyID) (lifecycle.Study, error) {
	const op = "inspect_study"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.Study{}, err
	}
	st, err := s.openStudy(ctx, op, study)
	if err != nil {
		return lifecycle.Study{}, err
	}
	defer st.unlock()
	return st.v.Study.Snapshot(), nil
}

// InspectTrial implements [lifecycle.Inspector].
func (s *Storage) InspectTrial(ctx context.Context, trial lifecycle.TrialID) (lifecycle.Trial, error) {
	const op = "inspect_trial"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.Trial{}, err
	}
	st, t, err := s.openTrial(ctx, op, trial)
	if err != nil {
		return lifecycle.Trial{}, err
	}
	defer st.unlock()
	return t.Trial.Snapshot(), nil
}
