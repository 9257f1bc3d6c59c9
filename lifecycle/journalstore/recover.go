package journalstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/store"
)

// rebuild loads a study's view from the journal and completes any
// transition a crash or failed write interrupted: missing mirrors, missing
// seals. Nothing else happens to the study until that succeeds.
func (s *Storage) rebuild(ctx context.Context, op string, c store.CaseID) (*jview, error) {
	v, err := loadView(ctx, s.j, c, s.onTrial(lifecycle.StudyID(c.String())), false)
	if err != nil {
		if lifecycle.KindOf(err) != 0 {
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
func loadView(ctx context.Context, j Journal, c store.CaseID, onTrial func(lifecycle.TrialID), concurrent bool) (*jview, error) {
	const op = "load_study"
	id := lifecycle.StudyID(c.String())
	run := studyRunID(c)
	recs, err := j.Read(ctx, run, 1)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || !admittedFrom(recs[0], StudySource) || recs[0].Case != c {
		return nil, lifecycle.NewError(lifecycle.KindNotFound, op, "study %q", id)
	}
	v := newView(c, onTrial)
	for _, r := range recs {
		if err := v.applyStudy(r); err != nil {
			return nil, err
		}
	}
	if v.head.Seq < 2 {
		return nil, &InconsistentError{Run: run, Seq: v.head.Seq, Detail: "the study run has no StudyOpened"}
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
		return nil, &InconsistentError{Run: run, Detail: "the journal's case index does not list the study run"}
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
			return nil, &InconsistentError{Run: t.run, Detail: fmt.Sprintf("the journal's case index disagrees with the run (%d records, listed %t)", len(trialRecs[i]), inCase[t.run])}
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
			return nil, &InconsistentError{Run: t.run, Seq: t.head.Seq, Detail: "the run's log leaf is not its terminal hash"}
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
func (s *Storage) settle(ctx context.Context, v *jview) error {
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
func (s *Storage) writeMirror(ctx context.Context, v *jview, a *authority) error {
	t := a.trial
	if len(t.awaiting) == 0 || t.awaiting[0] != a {
		return &InconsistentError{Run: v.run, Seq: a.rec.Seq, Detail: fmt.Sprintf("the mirror of this record is owed to trial %s out of order", t.ID)}
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
	recs, err := s.appendAt(ctx, t.run, t.head, epoch, a.mirror, nil)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := v.applyTrial(t, r); err != nil {
			return err
		}
	}
	if !a.done {
		return &InconsistentError{Run: t.run, Seq: t.head.Seq, Detail: "the appended mirror did not fold as one"}
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
func (s *Storage) seal(ctx context.Context, t *jtrial) error {
	leaf, err := s.j.Seal(ctx, t.run, t.endEpoch, outcomeOf(t.Lease.State))
	if err != nil {
		return err
	}
	if leaf != t.head.Hash {
		return &InconsistentError{Run: t.run, Seq: t.head.Seq, Detail: "the sealed leaf is not the run's terminal hash"}
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
func (s *Storage) takeLease(ctx context.Context, run store.RunID, owner string) (store.Epoch, error) {
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
