package lifecycle

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// JournalStorage implements [Storage] and [Inspector] on a journal store
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
// JournalStorage serializes the operations on each study and keeps a view
// of it derived from the journal (rebuilt on first use in a process). Each
// operation validates against the view, appends its records under the
// trial's fence, and updates the view by folding exactly the records it
// appended. Any failure after a write began discards the view, which is
// rebuilt from the journal before the study's next operation.
//
// That serialization is in this process only, so JournalStorage must be the
// only writer of its journal tenant's lifecycle records, and it enforces
// it: NewJournalStorage refuses a shared store, and holds an exclusive OS
// lock beside the journal's file until Close, so a second JournalStorage
// on the same file and tenant, in this process or another, is refused
// with [ErrLocked]. Memory grows with the studies used: each study's view
// stays loaded.
type JournalStorage struct {
	j store.Journal

	lock   io.Closer    // the one-writer lock; nil for an in-memory journal
	closed atomic.Bool  // set by Close; operations then fail
	life   sync.RWMutex // writers outside a study's lock hold it shared; Close exclusive

	mu         sync.Mutex
	studies    map[StudyID]*jstudy
	trialStudy map[TrialID]StudyID
}

// jstudy is one study's serialization point and view.
type jstudy struct {
	mu     sync.Mutex
	id     StudyID
	caseID store.CaseID
	v      *jview // nil: not loaded, or discarded after a failed write
}

var _ interface {
	Storage
	Inspector
} = (*JournalStorage)(nil)

// NewJournalStorage returns a JournalStorage writing to j, which holds the
// journal tenant's one-writer lock until Close. It refuses a store that
// several processes write (j.IsShared()) with KindUnsupported: the study's
// serialization lives in this process, and cross-process safety is not
// proven (spec/lifecycle.md section 14). It refuses a journal whose lock
// another JournalStorage holds with a KindConflict error that is also
// [ErrLocked] and carries a [*LockedError], and a journal that is not a
// local file (nor wraps one, through an Unwrap() store.Journal method) with
// KindUnsupported, since it could not enforce the rule.
func NewJournalStorage(j store.Journal) (*JournalStorage, error) {
	const op = "new_journal_storage"
	if j == nil {
		return nil, NewError(KindInvalid, op, "no journal")
	}
	if j.IsShared() {
		return nil, NewError(KindUnsupported, op, "the journal is shared by several processes; JournalStorage serializes a study in one process and cannot prove cross-process safety")
	}
	lock, err := takeWriterLock(context.Background(), op, j)
	if err != nil {
		return nil, err
	}
	return &JournalStorage{j: j, lock: lock, studies: map[StudyID]*jstudy{}, trialStudy: map[TrialID]StudyID{}}, nil
}

// Close waits for the operations in progress, releases the one-writer
// lock and makes every later operation fail (KindStorage). It does not
// close the journal, which the caller opened.
func (s *JournalStorage) Close() error {
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
		st.mu.Unlock()
	}
	if s.lock == nil {
		return nil
	}
	return s.lock.Close()
}

var errClosed = errors.New("the JournalStorage is closed")

// maxEpoch is the widest epoch, used to size a record before the
// epoch it is written under is known.
const maxEpoch = store.Epoch(1 << 62)

// mirrorSlack is the room an authority record leaves for its mirror, which
// repeats a subset of its fields plus a reference to it (at most a few
// hundred bytes more): refusing an authority that leaves less keeps a
// committed transition from owing a mirror too large to write.
const mirrorSlack = 1024

// precheck builds batch on head exactly as the store will, so that a record
// the store would refuse is refused before anything is written.
func precheck(op string, head store.Head, epoch store.Epoch, batch []store.Append, slack int) error {
	ps, err := store.BuildBatch(head, epoch, batch)
	var tl *store.RecordTooLargeError
	switch {
	case errors.As(err, &tl):
		return NewError(KindResourceLimit, op, "the transition's journal record would be %d bytes, over the %d-byte limit", tl.Bytes, tl.Limit)
	case err != nil:
		return NewError(KindInvalid, op, "the transition cannot be recorded: %v", err)
	}
	for _, p := range ps {
		if len(p.Raw) > store.MaxRecordBytes-slack {
			return NewError(KindResourceLimit, op, "the transition's journal record would be %d bytes, leaving less than %d of the %d-byte limit", len(p.Raw), slack, store.MaxRecordBytes)
		}
	}
	return nil
}

func journalError(op string, err error) error {
	var ce *corruptError
	if errors.As(err, &ce) {
		return &Error{Kind: KindStorage, Op: op, Detail: "the journal's lifecycle records are inconsistent", Err: err}
	}
	return StorageError(op, err)
}

// openStudy returns the study locked, with a current view.
func (s *JournalStorage) openStudy(ctx context.Context, op string, id StudyID) (*jstudy, error) {
	c, err := store.ParseCaseID(string(id))
	if err != nil || c.IsZero() || c.String() != string(id) {
		return nil, NewError(KindNotFound, op, "study %q", id)
	}
	s.mu.Lock()
	st := s.studies[id]
	if st == nil {
		st = &jstudy{id: id, caseID: c}
		s.studies[id] = st
	}
	s.mu.Unlock()
	st.mu.Lock()
	if s.closed.Load() {
		st.mu.Unlock()
		return nil, StorageError(op, errClosed)
	}
	if st.v == nil {
		v, err := s.rebuild(ctx, op, c)
		if err != nil {
			st.mu.Unlock()
			if KindOf(err) == KindNotFound {
				s.mu.Lock()
				if s.studies[id] == st {
					delete(s.studies, id)
				}
				s.mu.Unlock()
			}
			return nil, err
		}
		st.v = v
	}
	return st, nil
}

// studyOf finds the study of a trial: from memory, or from the trial run's
// first record, which carries the case.
func (s *JournalStorage) studyOf(ctx context.Context, op string, id TrialID) (StudyID, error) {
	s.mu.Lock()
	sid, ok := s.trialStudy[id]
	s.mu.Unlock()
	if ok {
		return sid, nil
	}
	run, err := store.ParseRunID(string(id))
	if err != nil || run.IsZero() || run.String() != string(id) {
		return "", NewError(KindNotFound, op, "trial %q", id)
	}
	recs, err := s.j.ReadPage(ctx, run, 1, 1)
	if err != nil {
		return "", journalError(op, err)
	}
	if len(recs) == 0 || !admittedFrom(recs[0], TrialSource) {
		return "", NewError(KindNotFound, op, "trial %q", id)
	}
	return StudyID(recs[0].Case.String()), nil
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
func (s *JournalStorage) openTrial(ctx context.Context, op string, id TrialID) (*jstudy, *jtrial, error) {
	sid, err := s.studyOf(ctx, op, id)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.openStudy(ctx, op, sid)
	if KindOf(err) == KindNotFound {
		return nil, nil, NewError(KindNotFound, op, "trial %q", id)
	}
	if err != nil {
		return nil, nil, err
	}
	t := st.v.byID[id]
	if t == nil {
		st.mu.Unlock()
		return nil, nil, NewError(KindNotFound, op, "trial %q", id)
	}
	return st, t, nil
}

func (s *JournalStorage) openManaged(ctx context.Context, op string, id TrialID) (*jstudy, *jtrial, error) {
	st, t, err := s.openTrial(ctx, op, id)
	if err == nil && !t.managed {
		st.mu.Unlock()
		return nil, nil, NewError(KindUnsupported, op, "trial %q is not lifecycle-managed", id)
	}
	return st, t, err
}

// openOwned returns the trial if tok is exactly its current owner.
func (s *JournalStorage) openOwned(ctx context.Context, op string, tok TrialOwnerToken) (*jstudy, *jtrial, error) {
	st, t, err := s.openManaged(ctx, op, tok.Trial)
	if err != nil {
		return nil, nil, err
	}
	if l := t.lease; l.State != TrialRunning || l.Owner != tok.Owner || l.Epoch != tok.Epoch {
		st.mu.Unlock()
		return nil, nil, NewError(KindLeaseLost, op, "trial %q is %s under owner %q epoch %d; token is owner %q epoch %d",
			t.id, l.State, l.Owner, l.Epoch, tok.Owner, tok.Epoch)
	}
	return st, t, nil
}

func (s *JournalStorage) onTrial(study StudyID) func(TrialID) {
	return func(t TrialID) {
		s.mu.Lock()
		s.trialStudy[t] = study
		s.mu.Unlock()
	}
}

// rebuild loads a study's view from the journal and completes any
// transition a crash or failed write interrupted: missing mirrors, missing
// seals. Nothing else happens to the study until that succeeds.
func (s *JournalStorage) rebuild(ctx context.Context, op string, c store.CaseID) (*jview, error) {
	v, err := loadView(ctx, s.j, c, s.onTrial(StudyID(c.String())), false)
	if err != nil {
		if KindOf(err) != 0 {
			return nil, err
		}
		return nil, journalError(op, err)
	}
	if err := s.settle(ctx, v); err != nil {
		return nil, journalError(op, err)
	}
	return v, nil
}

// loadView folds a study's records: the study run, then each trial run.
// It writes nothing: interrupted transitions are left in v.todo and in the
// trials' seal state for the caller to complete or report.
//
// With concurrent set, the journal may be written while it is read (a
// reader beside the process that writes the study), and the records are
// read so that they form a cut: the study run is read again after the
// trial runs, so every mirror read has its authority; a trial run whose
// mirror is missing is read again after that, so it holds every record
// the authority relied on; and a trial run read after the study run is
// folded only up to the first mirror of a later authority.
// Without it, the caller is the study's only writer and holds the study's
// lock, and any such mismatch is corruption.
func loadView(ctx context.Context, j store.Journal, c store.CaseID, onTrial func(TrialID), concurrent bool) (*jview, error) {
	const op = "load_study"
	id := StudyID(c.String())
	run := studyRunID(c)
	recs, err := j.Read(ctx, run, 1)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || !admittedFrom(recs[0], StudySource) || recs[0].Case != c {
		return nil, NewError(KindNotFound, op, "study %q", id)
	}
	v := newView(c, onTrial)
	for _, r := range recs {
		if err := v.applyStudy(r); err != nil {
			return nil, err
		}
	}
	if v.head.Seq < 2 {
		return nil, &corruptError{Run: run, Seq: v.head.Seq, Detail: "the study run has no StudyOpened"}
	}
	trialRecs := make([][]store.Record, 0, len(v.order))
	for _, t := range v.order {
		trs, err := j.Read(ctx, t.run, 1)
		if err != nil {
			return nil, err
		}
		trialRecs = append(trialRecs, trs)
	}
	// The case index is read after the runs: records are never removed,
	// so every run read with records must be listed.
	inCase := map[store.RunID]bool{}
	var after *store.RunID
	for {
		page, err := j.CaseRuns(ctx, c, after, store.MaxLimit)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			inCase[r] = true
		}
		after = &page[len(page)-1]
	}
	indexed := len(trialRecs)
	if concurrent {
		tail, err := j.Read(ctx, run, v.head.Seq+1)
		if err != nil {
			return nil, err
		}
		for _, r := range tail {
			if err := v.applyStudy(r); err != nil {
				return nil, err
			}
		}
		for _, t := range v.order[len(trialRecs):] {
			trs, err := j.Read(ctx, t.run, 1)
			if err != nil {
				return nil, err
			}
			trialRecs = append(trialRecs, trs)
		}
	}
	if !inCase[run] {
		return nil, &corruptError{Run: run, Detail: "the journal's case index does not list the study run"}
	}
	delete(inCase, run)
	for i, t := range v.order {
		for _, r := range trialRecs[i] {
			if concurrent && i >= indexed && mirrorsLater(v, r) {
				break // written after the study run was read
			}
			if err := v.applyTrial(t, r); err != nil {
				return nil, err
			}
		}
		// Disclosure finds a study's runs by case, so a run the index
		// misses is a hole in every disclosure of it.
		has := len(trialRecs[i]) > 0
		if i < indexed && (has && !inCase[t.run] || !concurrent && !has && inCase[t.run]) {
			return nil, &corruptError{Run: t.run, Detail: fmt.Sprintf("the journal's case index disagrees with the run (%d records, listed %t)", len(trialRecs[i]), inCase[t.run])}
		}
		delete(inCase, t.run)
	}
	if concurrent {
		// A trial run read before the study run's tail may lack records
		// an authority of the tail relied on (the claim a terminal ended,
		// say). Every one of them was written before that authority, so
		// before this read, which therefore holds them, and holds the
		// mirror too unless the transition is still in flight.
		for _, t := range v.order {
			if len(t.awaiting) == 0 {
				continue
			}
			trs, err := j.Read(ctx, t.run, t.head.Seq+1)
			if err != nil {
				return nil, err
			}
			for _, r := range trs {
				if mirrorsLater(v, r) {
					break
				}
				if err := v.applyTrial(t, r); err != nil {
					return nil, err
				}
			}
		}
	}
	v.foreign = slices.SortedFunc(maps.Keys(inCase), func(a, b store.RunID) int { return cmp.Compare(a.String(), b.String()) })
	concluded := v.toSeal
	v.toSeal = nil
	runs := make([]store.RunID, len(concluded))
	for i, t := range concluded {
		runs[i] = t.run
	}
	pos, err := j.LogPositions(ctx, runs)
	if err != nil {
		return nil, err
	}
	if len(pos) != len(runs) {
		return nil, fmt.Errorf("log positions: %d answers for %d runs", len(pos), len(runs))
	}
	for i, t := range concluded {
		t.sealed = pos[i] != nil
		if t.sealed && pos[i].Leaf != t.head.Hash {
			return nil, &corruptError{Run: t.run, Seq: t.head.Seq, Detail: "the run's log leaf is not its terminal hash"}
		}
		if !t.sealed {
			v.toSeal = append(v.toSeal, t)
		}
	}
	return v, nil
}

// mirrorsLater reports whether r mirrors a study run record beyond the
// ones folded into v.
func mirrorsLater(v *jview, r store.Record) bool {
	var f struct {
		Authority *jRef `json:"authority"`
	}
	return json.Unmarshal(r.Fields, &f) == nil && f.Authority != nil && f.Authority.Seq > v.head.Seq
}

// settle completes what the records folded since the last settle call
// for: each authority's mirror (with the lease changes around it), the
// seal of each trial run that concluded, and the trial-scope state the
// study run wrote after a trial ended. Its writes are recovery with no
// live caller, so they do not stop when ctx ends: a transition whose
// commit point landed is finished, not abandoned.
func (s *JournalStorage) settle(ctx context.Context, v *jview) error {
	wctx := context.WithoutCancel(ctx)
	for len(v.todo) > 0 {
		a := v.todo[0]
		v.todo = v.todo[1:]
		if a.done {
			continue
		}
		if err := s.writeMirror(wctx, v, a); err != nil {
			return err
		}
	}
	for len(v.toSeal) > 0 {
		t := v.toSeal[0]
		if !t.sealed {
			if err := s.seal(wctx, t); err != nil {
				return err
			}
		}
		v.toSeal = v.toSeal[1:]
	}
	for len(v.dirty) > 0 {
		t := v.dirty[0]
		v.dirty = v.dirty[1:]
		if err := t.flushOverlays(); err != nil {
			return err
		}
	}
	return nil
}

// writeMirror appends an authority's mirror to its trial run and folds it.
func (s *JournalStorage) writeMirror(ctx context.Context, v *jview, a *authority) error {
	t := a.trial
	if len(t.awaiting) == 0 || t.awaiting[0] != a {
		return &corruptError{Run: v.run, Seq: a.rec.Seq, Detail: fmt.Sprintf("the mirror of this record is owed to trial %s out of order", t.id)}
	}
	epoch := a.epoch
	if epoch == 0 {
		// A non-owner ends the trial (a sweeper, an abandonment): the
		// owner's epoch ends first, and a fresh epoch fences whatever that
		// owner still sends.
		if a.released != 0 {
			if err := s.j.ReleaseLease(ctx, t.run, a.released); err != nil {
				return err
			}
		}
		var err error
		if epoch, err = s.takeLease(ctx, t.run, journalOwner); err != nil {
			return err
		}
	}
	recs, err := s.j.Append(ctx, epoch, a.mirror)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := v.applyTrial(t, r); err != nil {
			return err
		}
	}
	if !a.done {
		return &corruptError{Run: t.run, Seq: t.head.Seq, Detail: "the appended mirror did not fold as one"}
	}
	if t.concluded {
		return s.seal(ctx, t)
	}
	if a.released != 0 {
		// A pause under a study-state mutation ends the owner's lease. The
		// pause is committed whatever happens here: an unreleased lease of
		// a paused trial is taken over by its next claim.
		_ = s.j.ReleaseLease(ctx, t.run, a.released)
	}
	return nil
}

// seal seals a concluded trial run under the epoch its conclusion was
// written at, then hands the lease back.
func (s *JournalStorage) seal(ctx context.Context, t *jtrial) error {
	leaf, err := s.j.Seal(ctx, t.run, t.endEpoch, outcomeOf(t.lease.State))
	if err != nil {
		return err
	}
	if leaf != t.head.Hash {
		return &corruptError{Run: t.run, Seq: t.head.Seq, Detail: "the sealed leaf is not the run's terminal hash"}
	}
	t.sealed = true
	// The run is sealed and refuses every append; its lease only has to
	// go so that nothing lists it as held. A failure here changes nothing
	// the lifecycle or the journal decides on.
	_ = s.j.ReleaseLease(ctx, t.run, t.endEpoch)
	return nil
}

// takeLease acquires a trial run's lease for owner, always at a new epoch.
// It is called only when the view says the trial has no live owner, so a
// live lease found there is an orphan of an operation that failed after
// acquiring (a claim whose record never landed, a pause whose release did
// not): nobody holds a token for it. It is released and the lease taken.
func (s *JournalStorage) takeLease(ctx context.Context, run store.RunID, owner string) (store.Epoch, error) {
	l, err := s.j.Acquire(ctx, run, owner, store.MaxTTL)
	var held *store.LeaseHeldError
	if errors.As(err, &held) {
		if err := s.j.ReleaseLease(ctx, run, held.Epoch); err != nil {
			return 0, err
		}
		l, err = s.j.Acquire(ctx, run, owner, store.MaxTTL)
	}
	if err != nil {
		return 0, err
	}
	return l.Epoch, nil
}

// transition commits one study run record (the authority of a transition)
// and completes what it calls for. fields is the kind's fields.
func (s *JournalStorage) transition(ctx context.Context, op string, st *jstudy, kind string, fields any) error {
	v := st.v
	raw, err := encodeFields(fields)
	if err != nil {
		return StorageError(op, err)
	}
	a := store.Append{Run: v.run, Case: v.caseID, Kind: kind, Fields: raw}
	if err := precheck(op, v.head, v.epoch, []store.Append{a}, mirrorSlack); err != nil {
		return err
	}
	recs, err := s.j.Append(ctx, v.epoch, []store.Append{a})
	if err == nil && len(recs) != 1 {
		err = fmt.Errorf("append of one record returned %d", len(recs))
	}
	if err == nil {
		err = v.applyStudy(recs[0])
	}
	if err == nil {
		err = s.settle(ctx, v)
	}
	if err != nil {
		st.v = nil
		return journalError(op, err)
	}
	return nil
}

// trialWrite appends records to a trial run under epoch and folds them.
func (s *JournalStorage) trialWrite(ctx context.Context, op string, st *jstudy, t *jtrial, epoch store.Epoch, batch []store.Append) error {
	if err := precheck(op, t.head, epoch, batch, 0); err != nil {
		return err
	}
	return s.appendTrial(ctx, op, st, t, epoch, batch)
}

func (s *JournalStorage) appendTrial(ctx context.Context, op string, st *jstudy, t *jtrial, epoch store.Epoch, batch []store.Append) error {
	recs, err := s.j.Append(ctx, epoch, batch)
	for i := 0; err == nil && i < len(recs); i++ {
		err = st.v.applyTrial(t, recs[i])
	}
	if err == nil && len(recs) != len(batch) {
		err = fmt.Errorf("append of %d records returned %d", len(batch), len(recs))
	}
	if err != nil {
		st.v = nil
		return journalError(op, err)
	}
	return nil
}

func (v *jview) trialAppend(t *jtrial, kind string, fields any) (store.Append, error) {
	raw, err := encodeFields(fields)
	if err != nil {
		return store.Append{}, err
	}
	return store.Append{Run: t.run, Case: v.caseID, Kind: kind, Fields: raw}, nil
}

// CreateStudy creates a study: a case, and its study run holding the
// StudyOpened record. It stands in for the surrounding study storage.
func (s *JournalStorage) CreateStudy(ctx context.Context, spec StudySpec) (StudyID, error) {
	const op = "create_study"
	if err := begin(ctx, op); err != nil {
		return "", err
	}
	if err := spec.Validate(); err != nil {
		return "", withOp(op, err)
	}
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed.Load() {
		return "", StorageError(op, errClosed)
	}
	c := store.NewCaseID()
	id := StudyID(c.String())
	run := studyRunID(c)
	admitted, err := encodeFields(fRunAdmitted{Source: StudySource})
	if err != nil {
		return "", StorageError(op, err)
	}
	opened, err := encodeFields(fStudyOpened{Format: journalFormat, Spec: spec})
	if err != nil {
		return "", StorageError(op, err)
	}
	// The study run's lease is never released: the study run is written
	// under this one epoch, and anyone else's append to it is fenced.
	l, err := s.j.Acquire(ctx, run, journalOwner, store.MaxTTL)
	if err != nil {
		return "", StorageError(op, err)
	}
	recs, err := s.j.Append(ctx, l.Epoch, []store.Append{
		{Run: run, Case: c, Kind: store.KindRunAdmitted, Fields: admitted},
		{Run: run, Case: c, Kind: RecordStudyOpened, Fields: opened},
	})
	if err != nil {
		return "", StorageError(op, err)
	}
	v := newView(c, s.onTrial(id))
	for _, r := range recs {
		if err := v.applyStudy(r); err != nil {
			return "", journalError(op, err)
		}
	}
	s.mu.Lock()
	s.studies[id] = &jstudy{id: id, caseID: c, v: v}
	s.mu.Unlock()
	return id, nil
}

// CreateUnmanagedTrial creates a trial outside the lifecycle protocol, as
// plain study CRUD would: it consumes a trial number and is a run of the
// study's case, but every lifecycle operation addressed to it answers
// KindUnsupported.
func (s *JournalStorage) CreateUnmanagedTrial(ctx context.Context, study StudyID, state TrialState) (TrialID, error) {
	const op = "create_unmanaged_trial"
	if err := begin(ctx, op); err != nil {
		return "", err
	}
	if !state.Valid() {
		return "", NewError(KindInvalid, op, "unknown state %q", state)
	}
	st, err := s.openStudy(ctx, op, study)
	if err != nil {
		return "", err
	}
	defer st.mu.Unlock()
	id := TrialID(store.NewRunID().String())
	if err := s.transition(ctx, op, st, RecordTrialReserved, fTrialReserved{Trial: id, Number: st.v.memStudy.trials, Managed: false, State: state}); err != nil {
		return "", err
	}
	return id, nil
}

// Studies lists the studies of the journal: the runs admitted from
// StudySource, which is the journal's source index, and the studies this
// value holds. A run listed there that does not open as a study is left
// out by the operations that load them.
func (s *JournalStorage) Studies(ctx context.Context) ([]StudyID, error) {
	const op = "studies"
	if err := begin(ctx, op); err != nil {
		return nil, err
	}
	ids, err := journalStudies(ctx, s.j)
	if err != nil {
		return nil, StorageError(op, err)
	}
	s.mu.Lock()
	for id := range s.studies {
		ids[id] = true
	}
	s.mu.Unlock()
	return slices.Sorted(maps.Keys(ids)), nil
}

func journalStudies(ctx context.Context, j store.Journal) (map[StudyID]bool, error) {
	ids := map[StudyID]bool{}
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
			ids[StudyID(a.Run.String())] = true
		}
		after = &page[len(page)-1]
	}
}

// ReserveAndCreateIfBudget implements [Storage]: TrialReserved in the study
// run, then the trial run's RunAdmitted and TrialCreated.
func (s *JournalStorage) ReserveAndCreateIfBudget(ctx context.Context, req ReserveAndCreateRequest) (ReservationOutcome, error) {
	const op = "reserve_and_create_if_budget"
	if err := begin(ctx, op); err != nil {
		return ReservationOutcome{}, err
	}
	if err := req.Validate(); err != nil {
		return ReservationOutcome{}, withOp(op, err)
	}
	st, err := s.openStudy(ctx, op, req.Study)
	if err != nil {
		return ReservationOutcome{}, err
	}
	defer st.mu.Unlock()
	v := st.v
	if req.Key != "" {
		if out, ok := v.keys[req.Key]; ok {
			return out, nil
		}
	}
	if v.memStudy.trials >= req.MaxTrials {
		return ReservationOutcome{Status: ReservationExhausted}, nil
	}
	id := TrialID(store.NewRunID().String())
	if err := s.transition(ctx, op, st, RecordTrialReserved, fTrialReserved{Trial: id, Number: v.memStudy.trials, Key: req.Key, Managed: true}); err != nil {
		return ReservationOutcome{}, err
	}
	t := st.v.byID[id]
	return ReservationOutcome{Status: ReservationCreated, Trial: t.id, Number: t.number}, nil
}

// Abandon implements [Storage]: TrialTerminal (cause abandoned) in the
// study run, then in the trial run under a fresh epoch, and the seal.
func (s *JournalStorage) Abandon(ctx context.Context, req AbandonRequest) (bool, error) {
	const op = "abandon"
	if err := begin(ctx, op); err != nil {
		return false, err
	}
	st, t, err := s.openManaged(ctx, op, req.Trial)
	if err != nil {
		return false, err
	}
	defer st.mu.Unlock()
	if t.lease.State != TrialWaiting {
		return false, nil
	}
	err = s.transition(ctx, op, st, RecordTrialTerminal, fStudyTerminal{Trial: t.id, State: TrialFailed, Cause: endAbandoned})
	return err == nil, err
}

// Observe implements [Storage].
func (s *JournalStorage) Observe(ctx context.Context, trial TrialID) (LeaseObservation, error) {
	const op = "observe"
	if err := begin(ctx, op); err != nil {
		return LeaseObservation{}, err
	}
	st, t, err := s.openManaged(ctx, op, trial)
	if err != nil {
		return LeaseObservation{}, err
	}
	defer st.mu.Unlock()
	return t.lease, nil
}

// newParams returns the parameters not set on t yet. stageParams has
// checked that the others repeat their value.
func newParams(t *jtrial, ps []Param) []jParam {
	var out []jParam
	for _, p := range ps {
		if _, ok := t.params[p.Name]; !ok {
			out = append(out, toJParam(p))
		}
	}
	return out
}

func checkParamsUTF8(ps []Param) error {
	for _, p := range ps {
		if err := checkUTF8JSON("distribution of "+p.Name, p.Distribution); err != nil {
			return err
		}
	}
	return nil
}

// Claim implements [Storage]: the trial run's lease is acquired (a new
// epoch, always) and TrialClaimed written under it.
func (s *JournalStorage) Claim(ctx context.Context, req ClaimRequest) (TrialOwnerToken, error) {
	const op = "claim"
	if err := begin(ctx, op); err != nil {
		return TrialOwnerToken{}, err
	}
	if err := req.Validate(); err != nil {
		return TrialOwnerToken{}, withOp(op, err)
	}
	at, err := formatTime(req.HeartbeatAt)
	if err == nil {
		err = checkParamsUTF8(req.Params)
	}
	if err != nil {
		return TrialOwnerToken{}, withOp(op, err)
	}
	st, t, err := s.openManaged(ctx, op, req.Trial)
	if err != nil {
		return TrialOwnerToken{}, err
	}
	defer st.mu.Unlock()
	v := st.v
	if s := t.lease.State; s != TrialWaiting && s != TrialPaused {
		return TrialOwnerToken{}, NewError(KindLeaseLost, op, "trial %q is %s, not claimable", t.id, s)
	}
	var w stagedWrites
	if err := stageParams(op, &w, &t.memTrial, req.Params); err != nil {
		return TrialOwnerToken{}, err
	}
	if err := stageBlobs(op, &w, &v.memStudy, &t.memTrial, req.States, nil, true); err != nil {
		return TrialOwnerToken{}, err
	}
	a, err := v.trialAppend(t, RecordTrialClaimed, fTrialClaimed{
		Owner: req.Owner, HeartbeatAt: at, Params: newParams(t, req.Params), States: toJBlobs(req.States, ScopeTrial),
	})
	if err != nil {
		return TrialOwnerToken{}, StorageError(op, err)
	}
	if err := precheck(op, t.head, maxEpoch, []store.Append{a}, 0); err != nil {
		return TrialOwnerToken{}, err
	}
	epoch, err := s.takeLease(ctx, t.run, req.Owner)
	if err != nil {
		// No record was written; a lease this left behind is an orphan
		// the next claim takes over.
		return TrialOwnerToken{}, StorageError(op, err)
	}
	if err := s.appendTrial(ctx, op, st, t, epoch, []store.Append{a}); err != nil {
		return TrialOwnerToken{}, err
	}
	return TrialOwnerToken{Trial: t.id, Owner: req.Owner, Epoch: t.lease.Epoch}, nil
}

// Renew implements [Storage]: one TrialHeartbeat under the owner's epoch.
// Each renewal is a record because the heartbeat sequence is part of the
// observation FailStale compares.
func (s *JournalStorage) Renew(ctx context.Context, req RenewRequest) (LeaseObservation, error) {
	const op = "renew"
	if err := begin(ctx, op); err != nil {
		return LeaseObservation{}, err
	}
	if err := req.Validate(); err != nil {
		return LeaseObservation{}, withOp(op, err)
	}
	at, err := formatTime(req.HeartbeatAt)
	if err != nil {
		return LeaseObservation{}, withOp(op, err)
	}
	st, t, err := s.openOwned(ctx, op, req.Owner)
	if err != nil {
		return LeaseObservation{}, err
	}
	defer st.mu.Unlock()
	a, err := st.v.trialAppend(t, RecordTrialHeartbeat, fTrialHeartbeat{HeartbeatSeq: t.lease.HeartbeatSeq + 1, HeartbeatAt: at})
	if err != nil {
		return LeaseObservation{}, StorageError(op, err)
	}
	if err := s.trialWrite(ctx, op, st, t, store.Epoch(t.lease.Epoch), []store.Append{a}); err != nil {
		return LeaseObservation{}, err
	}
	return t.lease, nil
}

// FailStale implements [Storage]. It reads no clock. The winner commits
// TrialTerminal (cause stale, with the outbox intent) in the study run;
// then the owner's lease is released and a fresh epoch acquired, which
// fences the owner in the journal too, before the trial run's mirror and
// the seal.
func (s *JournalStorage) FailStale(ctx context.Context, req FailStaleRequest) (bool, error) {
	const op = "fail_stale"
	if err := begin(ctx, op); err != nil {
		return false, err
	}
	if err := req.Validate(); err != nil {
		return false, withOp(op, err)
	}
	if err := checkUTF8JSON("intent data", req.Intent.Data); err != nil {
		return false, withOp(op, err)
	}
	st, t, err := s.openManaged(ctx, op, req.Observed.Trial)
	if err != nil {
		return false, err
	}
	defer st.mu.Unlock()
	if t.lease.State != TrialRunning || !t.lease.Equal(req.Observed) {
		return false, nil
	}
	err = s.transition(ctx, op, st, RecordTrialTerminal, fStudyTerminal{
		Trial: t.id, OwnerEpoch: t.lease.Epoch, State: TrialFailed, Cause: endStale,
		Intent: toJIntent(req.Intent), GraceNS: int64(req.Grace), TerminalSeq: uint64(len(st.v.outbox)) + 1,
	})
	return err == nil, err
}

// FencedMutate implements [Storage].
func (s *JournalStorage) FencedMutate(ctx context.Context, req FencedMutationRequest) error {
	return s.mutate(ctx, "fenced_mutate", nil, req)
}

// MutateOwned implements [Storage].
func (s *JournalStorage) MutateOwned(ctx context.Context, owner FinalizationToken, req FencedMutationRequest) error {
	return s.mutate(ctx, "mutate_owned", &owner, req)
}

// mutate writes TrialMutated in the trial run; a mutation that replaces
// study-scope state is a two-run transition, committed by TrialMutated in
// the study run and mirrored in the trial run.
func (s *JournalStorage) mutate(ctx context.Context, op string, owner *FinalizationToken, req FencedMutationRequest) error {
	if err := begin(ctx, op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return withOp(op, err)
	}
	if err := checkParamsUTF8(req.Params); err != nil {
		return withOp(op, err)
	}
	for k, val := range req.Attrs {
		if err := checkUTF8JSON("attribute "+k, val); err != nil {
			return withOp(op, err)
		}
	}
	st, t, err := s.openOwned(ctx, op, req.Owner)
	if err != nil {
		return err
	}
	defer st.mu.Unlock()
	v := st.v
	var fence uint64
	if owner != nil {
		if err := checkFinalizer(op, &v.memStudy, *owner); err != nil {
			return err
		}
		fence = owner.Fence
	}
	var w stagedWrites
	if err := stageParams(op, &w, &t.memTrial, req.Params); err != nil {
		return err
	}
	m := jMutation{Params: newParams(t, req.Params), States: toJBlobs(req.States, ScopeTrial), Pause: req.Pause}
	for _, iv := range req.Intermediate {
		if old, ok := t.inter[iv.Step]; ok {
			if old != iv.Value {
				return NewError(KindConflict, op, "step %d already reported a different value", iv.Step)
			}
			continue
		}
		m.Intermediate = append(m.Intermediate, jStep{Step: iv.Step, Value: iv.Value})
	}
	for k, val := range req.Attrs {
		if m.Attrs == nil {
			m.Attrs = map[string]string{}
		}
		m.Attrs[k] = string(compactJSON(val))
	}
	if err := stageBlobs(op, &w, &v.memStudy, &t.memTrial, req.States, owner, true); err != nil {
		return err
	}
	if study := toJBlobs(req.States, ScopeStudy); len(study) > 0 {
		return s.transition(ctx, op, st, RecordTrialMutated, fStudyMutated{
			Trial: t.id, OwnerEpoch: t.lease.Epoch, jMutation: m, StudyStates: study, FinalizerFence: fence,
		})
	}
	if len(m.Params)+len(m.Intermediate)+len(m.Attrs)+len(m.States) == 0 && !m.Pause {
		return nil // nothing changes; the fence check was the whole operation
	}
	epoch := store.Epoch(t.lease.Epoch)
	a, err := v.trialAppend(t, RecordTrialMutated, fTrialMutated{jMutation: m, FinalizerFence: fence})
	if err != nil {
		return StorageError(op, err)
	}
	if err := s.trialWrite(ctx, op, st, t, epoch, []store.Append{a}); err != nil {
		return err
	}
	if req.Pause {
		// The pause is committed; an unreleased lease of a paused trial is
		// taken over by its next claim.
		_ = s.j.ReleaseLease(context.WithoutCancel(ctx), t.run, epoch)
	}
	return nil
}

// Terminal implements [Storage].
func (s *JournalStorage) Terminal(ctx context.Context, req TerminalRequest) error {
	_, err := s.terminal(ctx, "terminal", nil, req, nil)
	return err
}

// TerminalWithIntent implements [Storage]: the terminal outcome and the
// outbox record are one study run record, the commit point of both.
func (s *JournalStorage) TerminalWithIntent(ctx context.Context, req TerminalRequest, intent FinalizationIntent) (OutboxKey, error) {
	return s.terminal(ctx, "terminal_with_intent", nil, req, &intent)
}

// TerminalWithIntentOwned implements [Storage].
func (s *JournalStorage) TerminalWithIntentOwned(ctx context.Context, owner FinalizationToken, req TerminalRequest, intent FinalizationIntent) (OutboxKey, error) {
	return s.terminal(ctx, "terminal_with_intent_owned", &owner, req, &intent)
}

func (s *JournalStorage) terminal(ctx context.Context, op string, owner *FinalizationToken, req TerminalRequest, intent *FinalizationIntent) (OutboxKey, error) {
	if err := begin(ctx, op); err != nil {
		return OutboxKey{}, err
	}
	if err := req.Validate(); err != nil {
		return OutboxKey{}, withOp(op, err)
	}
	if intent != nil {
		if err := intent.Validate(); err != nil {
			return OutboxKey{}, withOp(op, err)
		}
		if err := checkUTF8JSON("intent data", intent.Data); err != nil {
			return OutboxKey{}, withOp(op, err)
		}
	}
	st, t, err := s.openOwned(ctx, op, req.Owner)
	if err != nil {
		return OutboxKey{}, err
	}
	defer st.mu.Unlock()
	v := st.v
	f := fStudyTerminal{Trial: t.id, OwnerEpoch: t.lease.Epoch, State: req.State, Cause: endTerminal}
	if owner != nil {
		if err := checkFinalizer(op, &v.memStudy, *owner); err != nil {
			return OutboxKey{}, err
		}
		f.FinalizerFence = owner.Fence
	}
	if err := v.spec.CheckValues(req.State, req.Values); err != nil {
		return OutboxKey{}, withOp(op, err)
	}
	var w stagedWrites
	if err := stageBlobs(op, &w, &v.memStudy, &t.memTrial, req.States, owner, true); err != nil {
		return OutboxKey{}, err
	}
	if len(req.Values) > 0 {
		f.Values = slices.Clone(req.Values)
	}
	f.States, f.StudyStates = toJBlobs(req.States, ScopeTrial), toJBlobs(req.States, ScopeStudy)
	key := OutboxKey{Trial: t.id, Epoch: t.lease.Epoch}
	if intent != nil {
		f.Intent, f.TerminalSeq = toJIntent(*intent), uint64(len(v.outbox))+1
	}
	if err := s.transition(ctx, op, st, RecordTrialTerminal, f); err != nil {
		return OutboxKey{}, err
	}
	if intent == nil {
		return OutboxKey{}, nil
	}
	return key, nil
}

// ObserveFinalization implements [Storage]. It writes nothing.
func (s *JournalStorage) ObserveFinalization(ctx context.Context, study StudyID) (FinalizationObservation, error) {
	const op = "observe_finalization"
	if err := begin(ctx, op); err != nil {
		return FinalizationObservation{}, err
	}
	st, err := s.openStudy(ctx, op, study)
	if err != nil {
		return FinalizationObservation{}, err
	}
	defer st.mu.Unlock()
	return st.v.fin, nil
}

// AcquireFinalization implements [Storage]: FinalizationAcquired in the
// study run. The comparison is the whole decision; no clock is read.
func (s *JournalStorage) AcquireFinalization(ctx context.Context, req FinalizationAcquireRequest) (FinalizationToken, error) {
	const op = "acquire_finalization"
	if err := begin(ctx, op); err != nil {
		return FinalizationToken{}, err
	}
	if err := req.Validate(); err != nil {
		return FinalizationToken{}, withOp(op, err)
	}
	st, err := s.openStudy(ctx, op, req.Study)
	if err != nil {
		return FinalizationToken{}, err
	}
	defer st.mu.Unlock()
	fin := st.v.fin
	if fin != req.Observed {
		return FinalizationToken{}, NewError(KindConflict, op, "study %q finalization claim changed since it was observed (now fence %d, heartbeat %d, held=%t)",
			st.id, fin.Fence, fin.HeartbeatSeq, fin.Held)
	}
	if err := s.transition(ctx, op, st, RecordFinalizationAcquired, fFinalizationAcquired{Holder: req.Holder, Fence: fin.Fence + 1}); err != nil {
		return FinalizationToken{}, err
	}
	return FinalizationToken{Study: st.id, Holder: req.Holder, Fence: st.v.fin.Fence}, nil
}

// RenewFinalization implements [Storage].
func (s *JournalStorage) RenewFinalization(ctx context.Context, token FinalizationToken) (FinalizationObservation, error) {
	const op = "renew_finalization"
	if err := begin(ctx, op); err != nil {
		return FinalizationObservation{}, err
	}
	st, err := s.openStudy(ctx, op, token.Study)
	if err != nil {
		return FinalizationObservation{}, err
	}
	defer st.mu.Unlock()
	if err := checkFinalizer(op, &st.v.memStudy, token); err != nil {
		return FinalizationObservation{}, err
	}
	if err := s.transition(ctx, op, st, RecordFinalizationRenewed, fFinalizationRenewed{Fence: token.Fence, HeartbeatSeq: st.v.fin.HeartbeatSeq + 1}); err != nil {
		return FinalizationObservation{}, err
	}
	return st.v.fin, nil
}

// ReleaseFinalization implements [Storage]. The fence stays.
func (s *JournalStorage) ReleaseFinalization(ctx context.Context, token FinalizationToken) error {
	const op = "release_finalization"
	if err := begin(ctx, op); err != nil {
		return err
	}
	st, err := s.openStudy(ctx, op, token.Study)
	if err != nil {
		return err
	}
	defer st.mu.Unlock()
	if err := checkFinalizer(op, &st.v.memStudy, token); err != nil {
		return err
	}
	return s.transition(ctx, op, st, RecordFinalizationReleased, fFinalizationReleased{Fence: token.Fence})
}

// openOutbox returns the study of an outbox record's trial, locked. An
// unknown trial is an unknown record.
func (s *JournalStorage) openOutbox(ctx context.Context, op string, key OutboxKey) (*jstudy, *OutboxRecord, error) {
	st, _, err := s.openTrial(ctx, op, key.Trial)
	if KindOf(err) == KindNotFound {
		return nil, nil, NewError(KindNotFound, op, "outbox record %v", key)
	}
	if err != nil {
		return nil, nil, err
	}
	rec := st.v.records[key]
	if rec == nil {
		st.mu.Unlock()
		return nil, nil, NewError(KindNotFound, op, "outbox record %v", key)
	}
	return st, rec, nil
}

// AdvanceOutbox implements [Storage].
func (s *JournalStorage) AdvanceOutbox(ctx context.Context, req OutboxAdvanceRequest) (OutboxPhase, error) {
	return s.advance(ctx, "advance_outbox", nil, req)
}

// AdvanceOutboxOwned implements [Storage].
func (s *JournalStorage) AdvanceOutboxOwned(ctx context.Context, owner FinalizationToken, req OutboxAdvanceRequest) (OutboxPhase, error) {
	return s.advance(ctx, "advance_outbox_owned", &owner, req)
}

// advance writes OutboxAdvanced in the study run. Trial-scope state it
// carries belongs to a trial whose run is sealed, so it lives there too.
func (s *JournalStorage) advance(ctx context.Context, op string, owner *FinalizationToken, req OutboxAdvanceRequest) (OutboxPhase, error) {
	if err := begin(ctx, op); err != nil {
		return "", err
	}
	if err := req.Validate(); err != nil {
		return "", withOp(op, err)
	}
	for _, e := range req.Effects {
		if err := checkEffectUTF8(e); err != nil {
			return "", withOp(op, err)
		}
	}
	st, rec, err := s.openOutbox(ctx, op, req.Key)
	if err != nil {
		return "", err
	}
	defer st.mu.Unlock()
	v := st.v
	t := v.byID[req.Key.Trial]
	// Advancing is finalization work whether or not it carries state: a
	// non-owner moving the cursor under an active owner would turn the
	// owner's next write into a silently ignored replay.
	if err := checkStudyWriter(op, &v.memStudy, owner); err != nil {
		return "", err
	}
	cur, next := rec.Phase, req.Phase
	if next.Rank() <= cur.Rank() {
		if next == PhaseEffects {
			for _, e := range req.Effects {
				i := slices.IndexFunc(rec.Effects, func(r OutboxEffect) bool { return r.Name == e.Name })
				if i < 0 || !sameRecordedEffect(rec.Effects[i], e) {
					return "", NewError(KindConflict, op, "effect %q replayed with a different payload", e.Name)
				}
			}
		}
		return cur, nil
	}
	if next.Rank() > cur.Rank()+1 {
		return "", NewError(KindConflict, op, "outbox record %v is at %q; advancing to %q skips a phase", req.Key, cur, next)
	}
	if cur == PhaseEffects && len(rec.Completed) < len(rec.Effects) {
		return cur, nil
	}
	var w stagedWrites
	if err := stageBlobs(op, &w, &v.memStudy, &t.memTrial, req.States, owner, false); err != nil {
		return "", err
	}
	f := fOutboxAdvanced{Trial: req.Key.Trial, OwnerEpoch: req.Key.Epoch, Phase: next}
	for _, b := range req.States {
		f.States = append(f.States, toJBlob(b))
	}
	if owner != nil {
		f.FinalizerFence = owner.Fence
	}
	if next == PhaseEffects {
		effects := slices.Clone(req.Effects)
		slices.SortFunc(effects, func(a, b OutboxEffect) int { return cmp.Compare(a.Name, b.Name) })
		for _, e := range effects {
			f.Effects = append(f.Effects, toJEffect(e))
		}
	}
	if err := s.transition(ctx, op, st, RecordOutboxAdvanced, f); err != nil {
		return "", err
	}
	return next, nil
}

func checkEffectUTF8(e OutboxEffect) error {
	if err := checkUTF8JSON("payload of effect "+e.Name, e.Payload); err != nil {
		return err
	}
	if e.Replacement != nil {
		return checkParamsUTF8(e.Replacement.Params)
	}
	return nil
}

// sameRecordedEffect reports whether e, recorded, would be the recorded
// effect: both are compared in the canonical form a record holds them in.
func sameRecordedEffect(recorded, e OutboxEffect) bool {
	a, errA := canonicalEffect(recorded)
	b, errB := canonicalEffect(e)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

func canonicalEffect(e OutboxEffect) ([]byte, error) {
	b, err := json.Marshal(toJEffect(e))
	if err != nil {
		return nil, err
	}
	return canon.Canonicalize(b)
}

// GetOutbox implements [Storage].
func (s *JournalStorage) GetOutbox(ctx context.Context, key OutboxKey) (OutboxRecord, bool, error) {
	const op = "get_outbox"
	if err := begin(ctx, op); err != nil {
		return OutboxRecord{}, false, err
	}
	st, rec, err := s.openOutbox(ctx, op, key)
	if KindOf(err) == KindNotFound {
		return OutboxRecord{}, false, nil
	}
	if err != nil {
		return OutboxRecord{}, false, err
	}
	defer st.mu.Unlock()
	return cloneRecord(*rec), true, nil
}

// ListOutbox implements [Storage]: every study of the journal, each read
// under its own serialization, so the list is not one snapshot of studies
// that change while it is read.
func (s *JournalStorage) ListOutbox(ctx context.Context) ([]OutboxRecord, error) {
	const op = "list_outbox"
	ids, err := s.Studies(ctx)
	if err != nil {
		return nil, withOp(op, err)
	}
	out := []OutboxRecord{}
	for _, id := range ids {
		st, err := s.openStudy(ctx, op, id)
		if KindOf(err) == KindNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, key := range st.v.outbox {
			out = append(out, cloneRecord(*st.v.records[key]))
		}
		st.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b OutboxRecord) int { return a.Key.Compare(b.Key) })
	return out, nil
}

// ListOutboxPage implements [Storage]. A page reads only the records it
// returns from the study's view; the view itself is built once per
// process, from the whole study (spec/lifecycle.md section 14).
func (s *JournalStorage) ListOutboxPage(ctx context.Context, req OutboxPageRequest) (OutboxPage, error) {
	const op = "list_outbox_page"
	if err := begin(ctx, op); err != nil {
		return OutboxPage{}, err
	}
	if err := req.Validate(); err != nil {
		return OutboxPage{}, withOp(op, err)
	}
	st, err := s.openStudy(ctx, op, req.Study)
	if err != nil {
		return OutboxPage{}, err
	}
	defer st.mu.Unlock()
	return outboxPage(op, &st.v.memStudy, func(k OutboxKey) *OutboxRecord { return st.v.records[k] }, req)
}

// CompleteOutboxEffect implements [Storage]: EffectCompleted in the study
// run, once; a repeat writes nothing.
func (s *JournalStorage) CompleteOutboxEffect(ctx context.Context, req OutboxEffectCompletion) error {
	const op = "complete_outbox_effect"
	if err := begin(ctx, op); err != nil {
		return err
	}
	st, rec, e, err := s.openEffect(ctx, op, req.Effect)
	if err != nil {
		return err
	}
	defer st.mu.Unlock()
	if e.Kind != EffectExternal {
		return NewError(KindConflict, op, "effect %q is a %s effect, completed by the store, not acknowledged", e.Name, e.Kind)
	}
	if completion(rec, e.Name) != nil {
		return nil
	}
	return s.transition(ctx, op, st, RecordEffectCompleted, fEffectCompleted{Trial: rec.Key.Trial, OwnerEpoch: rec.Key.Epoch, Name: e.Name})
}

func (s *JournalStorage) openEffect(ctx context.Context, op string, key OutboxEffectKey) (*jstudy, *OutboxRecord, OutboxEffect, error) {
	st, rec, err := s.openOutbox(ctx, op, key.Outbox)
	if err != nil {
		return nil, nil, OutboxEffect{}, err
	}
	i := slices.IndexFunc(rec.Effects, func(e OutboxEffect) bool { return e.Name == key.Name })
	if i < 0 {
		st.mu.Unlock()
		return nil, nil, OutboxEffect{}, NewError(KindNotFound, op, "effect %q of %v", key.Name, key.Outbox)
	}
	return st, rec, rec.Effects[i], nil
}

// CreateReplacement implements [Storage]: ReplacementCreated in the study
// run completes the effect and, when the budget allows, reserves the new
// trial, whose run opens with its mirror. A replay writes nothing.
func (s *JournalStorage) CreateReplacement(ctx context.Context, effect OutboxEffectKey) (ReplacementOutcome, error) {
	const op = "create_replacement"
	if err := begin(ctx, op); err != nil {
		return ReplacementOutcome{}, err
	}
	st, rec, e, err := s.openEffect(ctx, op, effect)
	if err != nil {
		return ReplacementOutcome{}, err
	}
	defer st.mu.Unlock()
	if e.Kind != EffectReplacement {
		return ReplacementOutcome{}, NewError(KindConflict, op, "effect %q is a %s effect, not a replacement", e.Name, e.Kind)
	}
	if c := completion(rec, e.Name); c != nil {
		return *c.Replacement, nil
	}
	v := st.v
	f := fReplacementCreated{Trial: rec.Key.Trial, OwnerEpoch: rec.Key.Epoch, Name: e.Name, Status: ReplacementExhausted}
	if v.memStudy.trials < e.Replacement.MaxTrials {
		f.Status, f.NewTrial, f.Number = ReplacementCreated, TrialID(store.NewRunID().String()), v.memStudy.trials
		f.Params, f.States = toJParams(e.Replacement.Params), toJBlobs(e.Replacement.States, ScopeTrial)
	}
	if err := s.transition(ctx, op, st, RecordReplacementCreated, f); err != nil {
		return ReplacementOutcome{}, err
	}
	return *completion(rec, e.Name).Replacement, nil
}

// PutFinalizedState implements [Storage]: FinalizedStatePut in the study
// run, since the trial's run is sealed. Repeating the stored blob writes
// nothing.
func (s *JournalStorage) PutFinalizedState(ctx context.Context, req FinalizedStateRequest) error {
	const op = "put_finalized_state"
	if err := begin(ctx, op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return withOp(op, err)
	}
	st, t, err := s.openManaged(ctx, op, req.Trial)
	if err != nil {
		return err
	}
	defer st.mu.Unlock()
	if !t.lease.State.Terminal() {
		return NewError(KindConflict, op, "trial %q is %s, not terminal", t.id, t.lease.State)
	}
	var w stagedWrites
	if err := stageBlobs(op, &w, &st.v.memStudy, &t.memTrial, []StateBlob{req.State}, nil, false); err != nil {
		return err
	}
	if old, ok := t.states[req.State.Name]; ok && bytes.Equal(old.Data, req.State.Data) {
		return nil // kind and version are equal too: stageBlobs compared them
	}
	return s.transition(ctx, op, st, RecordFinalizedStatePut, fFinalizedStatePut{Trial: t.id, State: toJBlob(req.State)})
}

// InspectStudy implements [Inspector].
func (s *JournalStorage) InspectStudy(ctx context.Context, study StudyID) (Study, error) {
	const op = "inspect_study"
	if err := begin(ctx, op); err != nil {
		return Study{}, err
	}
	st, err := s.openStudy(ctx, op, study)
	if err != nil {
		return Study{}, err
	}
	defer st.mu.Unlock()
	return st.v.memStudy.snapshot(), nil
}

// InspectTrial implements [Inspector].
func (s *JournalStorage) InspectTrial(ctx context.Context, trial TrialID) (Trial, error) {
	const op = "inspect_trial"
	if err := begin(ctx, op); err != nil {
		return Trial{}, err
	}
	st, t, err := s.openTrial(ctx, op, trial)
	if err != nil {
		return Trial{}, err
	}
	defer st.mu.Unlock()
	return t.memTrial.snapshot(), nil
}
