package journalstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// Repaired is what one Repair voided: the records of one trial run, from
// the first that did not fold to the run's head (none, Authority 0, when
// the repair only completed an interrupted one).
type Repaired struct {
	Study lifecycle.StudyID `json:"study"`
	Trial lifecycle.TrialID `json:"trial"`
	From  store.Seq         `json:"from_seq"`
	To    store.Seq         `json:"to_seq"`
	// Records are the voided records, as the journal holds them.
	Records []VoidedRecord `json:"records"`
	// Authority is the study run record that voids them.
	Authority store.Seq `json:"authority_seq"`
	// OwnerFailed are the running trials whose owner voided records had
	// fenced out of its run, which Repair failed as a stale owner's (intent
	// RepairIntent): usually Trial, or one an interrupted repair left.
	OwnerFailed []lifecycle.TrialID `json:"owner_failed,omitempty"`
}

// RepairIntent is the finalization intent kind of a trial Repair failed
// because the voided records had fenced its owner out.
const RepairIntent = "runseal.repair"

// VoidedRecord is one record a repair voided.
type VoidedRecord struct {
	Seq   store.Seq   `json:"seq"`
	Kind  string      `json:"kind"`
	Epoch store.Epoch `json:"epoch"`
}

// Repair is an operator's way out for a study whose trial run holds
// records that are not the study's (written by a second writer before the
// one-writer lock existed, or appended to the run by hand), after which
// the study does not fold and every operation on it fails with
// [ErrInconsistent]. It voids that trial run's records from the first one
// that does not fold to the run's head, by appending to the study run a
// TrialRecordsVoided record with the operator's reason; the records stay
// in the journal (it is append-only, and they remain verifiable and
// visible in StudyView), but the fold skips them. The study is then
// rebuilt, completing what its records call for, and the next
// inconsistency, if any, is returned as the error beside the result: run
// Repair again for it.
//
// Repair refuses (KindConflict, nothing written) a study that folds and
// owes no failure, and
// one whose first inconsistency is not in a trial run's records after its
// opening two (the study run itself, or the journal's indexes), which no
// void can mend. A trial whose owner was fenced out by the voided records
// (its run's journal lease moved past the owner's epoch)
// would keep a lifecycle owner that can no longer write its run; Repair
// fails it at once through FailStale, with intent kind RepairIntent (the
// reason in its data) and a grace of 1ns, since the operator, not a grace
// interval, proved the owner gone. Repair is meant for an operator with
// the service stopped (journal study repair takes the one-writer lock);
// an owner acting on the same Storage while it runs could commit in the
// study run before the failure lands. A repair interrupted between its
// void and the failure is completed by running Repair again.
func (s *Storage) Repair(ctx context.Context, study lifecycle.StudyID, reason string) (Repaired, error) {
	const op = "repair"
	if err := model.Begin(ctx, op); err != nil {
		return Repaired{}, err
	}
	if err := model.CheckName("reason", reason); err != nil {
		return Repaired{}, model.WithOp(op, err)
	}
	c, err := store.ParseCaseID(string(study))
	if err != nil || c.IsZero() || c.String() != string(study) {
		return Repaired{}, lifecycle.NewError(lifecycle.KindNotFound, op, "study %q", study)
	}
	st, err := s.lockStudy(ctx, op, study, c)
	if err != nil {
		return Repaired{}, err
	}
	rep, err := s.void(ctx, op, st, reason)
	st.v = nil
	st.unlock()
	if err != nil {
		return Repaired{}, err
	}
	// Rebuild now, so the caller learns whether the study folds.
	if st, err = s.openStudy(ctx, op, study); err != nil {
		return rep, err
	}
	// Fail the running owners the voided records fenced out: this
	// repair's, or an earlier one's that did not get this far.
	var fenced []lifecycle.LeaseObservation
	for _, t := range st.v.order {
		if t.Lease.State == lifecycle.TrialRunning && uint64(t.voidEpoch) > t.Lease.Epoch {
			fenced = append(fenced, t.Lease)
		}
	}
	st.unlock()
	if rep.Authority == 0 && len(fenced) == 0 {
		return Repaired{}, lifecycle.NewError(lifecycle.KindConflict, op, "study %s folds; there is nothing to repair", study)
	}
	data, err := json.Marshal(map[string]string{"reason": reason})
	if err != nil {
		return rep, lifecycle.StorageError(op, err)
	}
	for _, obs := range fenced {
		won, err := s.FailStale(ctx, lifecycle.FailStaleRequest{Observed: obs, Grace: time.Nanosecond, Intent: lifecycle.FinalizationIntent{Kind: RepairIntent, Data: data}})
		if err == nil && !won {
			err = lifecycle.NewError(lifecycle.KindConflict, op, "trial %s changed while it was repaired; it was not failed", obs.Trial)
		}
		if err != nil {
			return rep, model.WithOp(op, err)
		}
		rep.OwnerFailed = append(rep.OwnerFailed, obs.Trial)
	}
	return rep, nil
}

// void appends the voiding record for the study's first inconsistency.
// The caller holds the study's lock.
func (s *Storage) void(ctx context.Context, op string, st *jstudy, reason string) (Repaired, error) {
	_, err := loadView(ctx, s.j, st.caseID, nil, false)
	var ie *InconsistentError
	switch {
	case err == nil:
		return Repaired{Study: st.id}, nil // nothing to void
	case !errors.As(err, &ie):
		return Repaired{}, journalError(op, err)
	}
	// The study run alone, which folded before the trial runs did.
	recs, err := s.j.Read(ctx, studyRunID(st.caseID), 1)
	if err != nil {
		return Repaired{}, lifecycle.StorageError(op, err)
	}
	v := newView(st.caseID, nil)
	for _, r := range recs {
		if err := v.applyStudy(r); err != nil {
			return Repaired{}, lifecycle.NewError(lifecycle.KindConflict, op, "the study run itself does not fold (%v); a repair voids trial run records only", err)
		}
	}
	t := v.trialFor(ie.Run)
	if t == nil || !t.Managed || ie.Seq < 3 {
		return Repaired{}, lifecycle.NewError(lifecycle.KindConflict, op, "the study does not fold at run %s seq %d (%s), which is not a lifecycle trial's record after its opening two; a repair cannot mend it", ie.Run, ie.Seq, ie.Detail)
	}
	trs, err := s.j.Read(ctx, t.run, ie.Seq)
	if err != nil {
		return Repaired{}, lifecycle.StorageError(op, err)
	}
	if len(trs) == 0 || trs[0].Seq != ie.Seq {
		return Repaired{}, lifecycle.NewError(lifecycle.KindConflict, op, "run %s has no record %d to void", t.run, ie.Seq)
	}
	rep := Repaired{Study: st.id, Trial: t.ID, From: ie.Seq, To: trs[len(trs)-1].Seq}
	for _, r := range trs {
		rep.Records = append(rep.Records, VoidedRecord{Seq: r.Seq, Kind: r.Kind, Epoch: r.Epoch})
	}
	fields, err := encodeFields(fRecordsVoided{Trial: t.ID, From: uint64(rep.From), To: uint64(rep.To), Reason: reason})
	if err != nil {
		return Repaired{}, lifecycle.StorageError(op, err)
	}
	batch := []store.Append{{Run: v.run, Case: v.caseID, Kind: RecordTrialRecordsVoided, Fields: fields}}
	if _, err := precheck(op, v.head, v.epoch, batch, 0); err != nil {
		return Repaired{}, err
	}
	out, err := s.j.Append(ctx, v.epoch, batch)
	if err != nil {
		return Repaired{}, lifecycle.StorageError(op, err)
	}
	rep.Authority = out[0].Seq
	return rep, nil
}
