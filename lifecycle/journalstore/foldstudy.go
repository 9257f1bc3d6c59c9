package journalstore

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// applyStudy folds one study run record.
func (v *jview) applyStudy(r store.Record) error {
	if err := checkChain(v.head, v.run, r); err != nil {
		return err
	}
	if r.Case != v.caseID {
		return corrupt(r, "record of the study run is not stamped with the study's case")
	}
	switch r.Seq {
	case 1:
		var f fRunAdmitted
		if r.Kind != store.KindRunAdmitted {
			return corrupt(r, "a study run opens with RunAdmitted, not %s", r.Kind)
		}
		if err := decodeFields(r, &f); err != nil {
			return err
		}
		if f.Source != StudySource {
			return corrupt(r, "study run admitted from source %q", f.Source)
		}
		v.epoch = r.Epoch
		v.head = store.Head{Seq: r.Seq, Hash: r.Hash}
		return nil
	case 2:
		var f fStudyOpened
		if r.Kind != RecordStudyOpened {
			return corrupt(r, "the study run's second record is %s, not StudyOpened", r.Kind)
		}
		if err := decodeFields(r, &f); err != nil {
			return err
		}
		if f.Format != journalFormat {
			return corrupt(r, "lifecycle record format %d; this program reads format %d", f.Format, journalFormat)
		}
		if err := f.Spec.Validate(); err != nil {
			return corrupt(r, "study spec: %v", err)
		}
		v.Spec = f.Spec
	}
	if r.Epoch != v.epoch {
		return corrupt(r, "study run record at epoch %d; the study run is written at epoch %d", r.Epoch, v.epoch)
	}
	var err error
	switch r.Kind {
	case RecordStudyOpened:
		if r.Seq != 2 {
			err = corrupt(r, "StudyOpened after the study opened")
		}
	case RecordTrialReserved:
		err = v.foldReserved(r)
	case RecordTrialMutated:
		err = v.foldStudyMutated(r)
	case RecordTrialTerminal:
		err = v.foldStudyTerminal(r)
	case RecordTrialRecordsVoided:
		err = v.foldVoided(r)
	case RecordFinalizationAcquired:
		var f fFinalizationAcquired
		if err = decodeFields(r, &f); err == nil {
			if f.Fence != v.Fin.Fence+1 || model.CheckName("holder", f.Holder) != nil {
				err = corrupt(r, "acquisition at fence %d by %q; the claim is at fence %d", f.Fence, f.Holder, v.Fin.Fence)
			} else {
				v.Fin.Fence, v.Fin.Held, v.Fin.Holder = f.Fence, true, f.Holder
			}
		}
	case RecordFinalizationRenewed:
		var f fFinalizationRenewed
		if err = decodeFields(r, &f); err == nil {
			if !v.Fin.Held || f.Fence != v.Fin.Fence || f.HeartbeatSeq != v.Fin.HeartbeatSeq+1 {
				err = corrupt(r, "renewal of fence %d to heartbeat %d; the claim is %+v", f.Fence, f.HeartbeatSeq, v.Fin)
			} else {
				v.Fin.HeartbeatSeq = f.HeartbeatSeq
			}
		}
	case RecordFinalizationReleased:
		var f fFinalizationReleased
		if err = decodeFields(r, &f); err == nil {
			if !v.Fin.Held || f.Fence != v.Fin.Fence {
				err = corrupt(r, "release of fence %d; the claim is %+v", f.Fence, v.Fin)
			} else {
				v.Fin.Held, v.Fin.Holder = false, ""
			}
		}
	case RecordOutboxAdvanced:
		err = v.foldAdvanced(r)
	case RecordEffectCompleted:
		err = v.foldCompleted(r)
	case RecordReplacementCreated:
		err = v.foldReplacement(r)
	case RecordFinalizedStatePut:
		var f fFinalizedStatePut
		if err = decodeFields(r, &f); err == nil {
			var t *jtrial
			if t, err = v.endedTrial(r, f.Trial); err == nil {
				if f.State.Scope != lifecycle.ScopeTrial || f.State.Name == lifecycle.ConstraintsStateName {
					err = corrupt(r, "finalized state %s/%q", f.State.Scope, f.State.Name)
				} else {
					t.addOverlay(v, r, f.State)
				}
			}
		}
	default:
		err = corrupt(r, "kind %s has no place in a study run", r.Kind)
	}
	if err != nil {
		return err
	}
	v.head = store.Head{Seq: r.Seq, Hash: r.Hash}
	return nil
}

func (v *jview) managedTrial(r store.Record, id lifecycle.TrialID) (*jtrial, error) {
	t := v.byID[id]
	if t == nil || !t.Managed {
		return nil, corrupt(r, "names trial %q, which is not a managed trial of the study", id)
	}
	return t, nil
}

// endedTrial finds a trial whose end the study run committed.
func (v *jview) endedTrial(r store.Record, id lifecycle.TrialID) (*jtrial, error) {
	t, err := v.managedTrial(r, id)
	if err == nil && !t.ended {
		err = corrupt(r, "writes finalized state of trial %q, which has not ended", id)
	}
	return t, err
}

// addTrial registers a reserved trial. Its run's first records, the mirror
// of the reservation, follow.
func (v *jview) addTrial(r store.Record, id lifecycle.TrialID, number uint64, managed bool) (*jtrial, error) {
	run, err := store.ParseRunID(string(id))
	if err != nil || run.IsZero() || run.String() != string(id) || run == v.run {
		return nil, corrupt(r, "trial id %q is not a fresh run id", id)
	}
	if v.byID[id] != nil {
		return nil, corrupt(r, "trial %q reserved twice", id)
	}
	if number != v.Study.Trials {
		return nil, corrupt(r, "trial number %d; the study holds %d trial records", number, v.Study.Trials)
	}
	t := &jtrial{
		Trial: model.Trial{
			Study:   &v.Study,
			ID:      id,
			Number:  number,
			Managed: managed,
			Params:  map[string]lifecycle.Param{},
			Inter:   map[uint64]float64{},
			Attrs:   map[string]json.RawMessage{},
			States:  map[string]lifecycle.StateBlob{},
		},
		run: run,
	}
	t.Lease = lifecycle.LeaseObservation{Trial: id, State: lifecycle.TrialWaiting}
	v.Study.Trials++
	v.byID[id] = t
	v.order = append(v.order, t)
	if v.onTrial != nil {
		v.onTrial(id)
	}
	return t, nil
}

func (v *jview) foldReserved(r store.Record) error {
	var f fTrialReserved
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	if f.Managed == (f.State != "") || (!f.Managed && !f.State.Valid()) || (!f.Managed && f.Key != "") {
		return corrupt(r, "reservation of trial %q: managed=%t with state %q and key %q", f.Trial, f.Managed, f.State, f.Key)
	}
	if f.Key != "" {
		if _, ok := v.Keys[f.Key]; ok || model.CheckName("reservation key", f.Key) != nil {
			return corrupt(r, "reservation key %q reused or malformed", f.Key)
		}
	}
	t, err := v.addTrial(r, f.Trial, f.Number, f.Managed)
	if err != nil {
		return err
	}
	if f.Key != "" {
		v.Keys[f.Key] = lifecycle.ReservationOutcome{Status: lifecycle.ReservationCreated, Trial: t.ID, Number: t.Number}
	}
	created := fTrialCreated{Number: f.Number, Managed: f.Managed, State: f.State}
	return v.await(t, r, 1, 0, creationMirror(v.caseID, t.run, created))
}

// creationMirror is the batch that opens a trial run.
func creationMirror(c store.CaseID, run store.RunID, f fTrialCreated) mirrorFunc {
	return func(ref jRef) ([]store.Append, error) {
		f.Authority = ref
		admitted, err := encodeFields(fRunAdmitted{Source: TrialSource})
		if err != nil {
			return nil, err
		}
		created, err := encodeFields(f)
		if err != nil {
			return nil, err
		}
		return []store.Append{
			{Run: run, Case: c, Kind: store.KindRunAdmitted, Fields: admitted},
			{Run: run, Case: c, Kind: RecordTrialCreated, Fields: created},
		}, nil
	}
}

func refOf(r store.Record) jRef { return jRef{Seq: r.Seq, Hash: r.Hash} }

// mirrorFunc builds the mirror of an authority record, given the
// reference to it (its seq and hash).
type mirrorFunc func(ref jRef) ([]store.Append, error)

// await registers the mirror that r's transition owes trial t's run.
func (v *jview) await(t *jtrial, r store.Record, epoch, released store.Epoch, mirror mirrorFunc) error {
	m, err := mirror(refOf(r))
	if err != nil {
		return err
	}
	a := &authority{rec: r, mirror: m, build: mirror, epoch: epoch, released: released, trial: t}
	t.awaiting = append(t.awaiting, a)
	v.todo = append(v.todo, a)
	return nil
}

// applyStudyStates checks that a record's study-scope blobs were written by
// an allowed writer (section 7: the exact holder once the protocol is
// active) and replace compatible blobs, and applies them.
func (v *jview) applyStudyStates(r store.Record, blobs []jBlob, fence uint64) error {
	if len(blobs) == 0 {
		return v.checkFence(r, fence)
	}
	if fence == 0 && v.Fin.Fence > 0 {
		return corrupt(r, "writes study state without the finalization owner after the protocol became active")
	}
	if err := v.checkFence(r, fence); err != nil {
		return err
	}
	for _, b := range blobs {
		if b.Scope != lifecycle.ScopeStudy {
			return corrupt(r, "study state %q has scope %q", b.Name, b.Scope)
		}
		if old, ok := v.States[b.Name]; ok && (old.Kind != b.Kind || old.Version != b.Version) {
			return corrupt(r, "study state %q replaced by another kind or version", b.Name)
		}
		v.States[b.Name] = fromJBlob(b)
	}
	return nil
}

// checkFence checks a record made under a finalization token: the token
// must have been the exact holder's.
func (v *jview) checkFence(r store.Record, fence uint64) error {
	if fence != 0 && (!v.Fin.Held || v.Fin.Fence != fence) {
		return corrupt(r, "made under finalization fence %d; the claim is %+v", fence, v.Fin)
	}
	return nil
}

func (v *jview) foldStudyMutated(r store.Record) error {
	var f fStudyMutated
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	t, err := v.managedTrial(r, f.Trial)
	if err != nil {
		return err
	}
	if len(f.StudyStates) == 0 || t.ended || f.OwnerEpoch == 0 {
		return corrupt(r, "study-run mutation of trial %q with no study state, at owner epoch %d, or after its end", f.Trial, f.OwnerEpoch)
	}
	if err := v.applyStudyStates(r, f.StudyStates, f.FinalizerFence); err != nil {
		return err
	}
	released := store.Epoch(0)
	if f.Pause {
		released = store.Epoch(f.OwnerEpoch)
	}
	return v.await(t, r, store.Epoch(f.OwnerEpoch), released, func(ref jRef) ([]store.Append, error) {
		fields, err := encodeFields(fTrialMutated{jMutation: f.jMutation, FinalizerFence: f.FinalizerFence, Authority: &ref})
		if err != nil {
			return nil, err
		}
		return []store.Append{{Run: t.run, Case: v.caseID, Kind: RecordTrialMutated, Fields: fields}}, nil
	})
}

func (v *jview) foldStudyTerminal(r store.Record) error {
	var f fStudyTerminal
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	t, err := v.managedTrial(r, f.Trial)
	if err != nil {
		return err
	}
	if t.ended {
		return corrupt(r, "trial %q ends twice", f.Trial)
	}
	if !f.State.Terminal() || v.Spec.CheckValues(f.State, f.Values) != nil {
		return corrupt(r, "terminal state %q with %d values", f.State, len(f.Values))
	}
	var epoch, released store.Epoch
	switch f.Cause {
	case endTerminal:
		epoch, released = store.Epoch(f.OwnerEpoch), store.Epoch(f.OwnerEpoch)
	case endStale:
		released = store.Epoch(f.OwnerEpoch)
		if f.Intent == nil || f.GraceNS <= 0 || f.State != lifecycle.TrialFailed || len(f.States)+len(f.StudyStates) > 0 {
			return corrupt(r, "stale failure without an intent or grace, or with state")
		}
	case endAbandoned:
		if f.Intent != nil || f.OwnerEpoch != 0 || f.State != lifecycle.TrialFailed || len(f.States)+len(f.StudyStates) > 0 {
			return corrupt(r, "abandonment with an intent, an owner epoch or state")
		}
	default:
		return corrupt(r, "unknown cause %q", f.Cause)
	}
	if (f.Cause == endAbandoned) != (f.OwnerEpoch == 0) || (f.Cause != endStale && f.GraceNS != 0) {
		return corrupt(r, "cause %s at owner epoch %d with grace %d", f.Cause, f.OwnerEpoch, f.GraceNS)
	}
	if err := v.applyStudyStates(r, f.StudyStates, f.FinalizerFence); err != nil {
		return err
	}
	if f.Intent != nil {
		if f.TerminalSeq != uint64(len(v.Outbox))+1 || (lifecycle.FinalizationIntent{Kind: f.Intent.Kind}).Validate() != nil {
			return corrupt(r, "outbox record at terminal sequence %d; the study has %d", f.TerminalSeq, len(v.Outbox))
		}
		key := lifecycle.OutboxKey{Trial: t.ID, Epoch: f.OwnerEpoch}
		cause := lifecycle.CauseTerminal
		if f.Cause == endStale {
			cause = lifecycle.CauseStale
		}
		v.Outbox = append(v.Outbox, key)
		v.outboxOpen++
		v.records[key] = &lifecycle.OutboxRecord{
			Key:         key,
			Study:       v.ID,
			TerminalSeq: f.TerminalSeq,
			Outcome:     f.State,
			Cause:       cause,
			Grace:       time.Duration(f.GraceNS),
			Intent:      fromJIntent(*f.Intent),
			Phase:       lifecycle.PhaseInitial,
		}
	} else if f.TerminalSeq != 0 {
		return corrupt(r, "terminal sequence without an outbox intent")
	}
	t.ended = true
	mirror := fTrialTerminal{OwnerEpoch: f.OwnerEpoch, State: f.State, Cause: f.Cause, Values: f.Values, States: f.States}
	return v.await(t, r, epoch, released, func(ref jRef) ([]store.Append, error) {
		mirror.Authority = ref
		fields, err := encodeFields(mirror)
		if err != nil {
			return nil, err
		}
		concluded, err := encodeFields(fRunConcluded{Outcome: outcomeOf(f.State), Reason: string(f.Cause)})
		if err != nil {
			return nil, err
		}
		return []store.Append{
			{Run: t.run, Case: v.caseID, Kind: RecordTrialTerminal, Fields: fields},
			{Run: t.run, Case: v.caseID, Kind: store.KindRunConcluded, Fields: concluded},
		}, nil
	})
}

func (v *jview) outboxRecord(r store.Record, trial lifecycle.TrialID, epoch uint64) (*lifecycle.OutboxRecord, error) {
	rec := v.records[lifecycle.OutboxKey{Trial: trial, Epoch: epoch}]
	if rec == nil {
		return nil, corrupt(r, "names outbox record (%s, %d), which does not exist", trial, epoch)
	}
	return rec, nil
}

func (v *jview) foldAdvanced(r store.Record) error {
	var f fOutboxAdvanced
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	rec, err := v.outboxRecord(r, f.Trial, f.OwnerEpoch)
	if err != nil {
		return err
	}
	if f.Phase.Rank() != rec.Phase.Rank()+1 || (rec.Phase == lifecycle.PhaseEffects && len(rec.Completed) < len(rec.Effects)) ||
		(len(f.Effects) > 0 && f.Phase != lifecycle.PhaseEffects) {
		return corrupt(r, "advance of %v from %s to %s", rec.Key, rec.Phase, f.Phase)
	}
	if f.FinalizerFence == 0 && v.Fin.Fence > 0 {
		return corrupt(r, "advance without the finalization owner after the protocol became active")
	}
	var study []jBlob
	t := v.byID[f.Trial]
	for _, b := range f.States {
		if b.Scope == lifecycle.ScopeStudy {
			study = append(study, b)
		} else if b.Scope != lifecycle.ScopeTrial || b.Name == lifecycle.ConstraintsStateName {
			return corrupt(r, "outbox state %s/%q", b.Scope, b.Name)
		} else {
			t.addOverlay(v, r, b)
		}
	}
	if err := v.applyStudyStates(r, study, f.FinalizerFence); err != nil {
		return err
	}
	if f.Phase == lifecycle.PhaseEffects {
		rec.Effects = make([]lifecycle.OutboxEffect, 0, len(f.Effects))
		for _, e := range f.Effects {
			rec.Effects = append(rec.Effects, fromJEffect(e))
		}
		if !slices.IsSortedFunc(rec.Effects, func(a, b lifecycle.OutboxEffect) int { return cmp.Compare(a.Name, b.Name) }) {
			return corrupt(r, "effects are not in name order")
		}
	}
	rec.Phase = f.Phase
	if f.Phase == lifecycle.PhaseDone {
		v.outboxOpen--
	}
	return nil
}

func (v *jview) effect(r store.Record, trial lifecycle.TrialID, epoch uint64, name string, kind lifecycle.EffectKind) (*lifecycle.OutboxRecord, error) {
	rec, err := v.outboxRecord(r, trial, epoch)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(rec.Effects, func(e lifecycle.OutboxEffect) bool { return e.Name == name })
	if i < 0 || rec.Effects[i].Kind != kind || model.Completion(rec, name) != nil {
		return nil, corrupt(r, "completes effect %q of %v, which is not an open %s effect", name, rec.Key, kind)
	}
	return rec, nil
}

func (v *jview) foldCompleted(r store.Record) error {
	var f fEffectCompleted
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	rec, err := v.effect(r, f.Trial, f.OwnerEpoch, f.Name, lifecycle.EffectExternal)
	if err != nil {
		return err
	}
	model.AddCompletion(rec, lifecycle.EffectCompletion{Name: f.Name})
	return nil
}

func (v *jview) foldReplacement(r store.Record) error {
	var f fReplacementCreated
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	rec, err := v.effect(r, f.Trial, f.OwnerEpoch, f.Name, lifecycle.EffectReplacement)
	if err != nil {
		return err
	}
	key := lifecycle.OutboxEffectKey{Outbox: rec.Key, Name: f.Name}
	switch f.Status {
	case lifecycle.ReplacementExhausted:
		if f.NewTrial != "" || f.Number != 0 || len(f.Params)+len(f.States) > 0 {
			return corrupt(r, "exhausted replacement names a trial")
		}
		out := lifecycle.ReplacementOutcome{Status: lifecycle.ReplacementExhausted}
		model.AddCompletion(rec, lifecycle.EffectCompletion{Name: f.Name, Replacement: &out})
		return nil
	case lifecycle.ReplacementCreated:
	default:
		return corrupt(r, "replacement status %q", f.Status)
	}
	t, err := v.addTrial(r, f.NewTrial, f.Number, true)
	if err != nil {
		return err
	}
	t.ReplacementOf = &key
	out := lifecycle.ReplacementOutcome{Status: lifecycle.ReplacementCreated, Trial: t.ID, Number: t.Number}
	model.AddCompletion(rec, lifecycle.EffectCompletion{Name: f.Name, Replacement: &out})
	created := fTrialCreated{
		Number: f.Number, Managed: true, Params: f.Params, States: f.States,
		ReplacementOf: &jEffectKey{Trial: f.Trial, OwnerEpoch: f.OwnerEpoch, Name: f.Name},
	}
	return v.await(t, r, 1, 0, creationMirror(v.caseID, t.run, created))
}

// foldVoided records an operator's repair: the trial run's records in the
// range are skipped by the trial fold. A range starts after the run's
// opening records and after any earlier range, so the repair can void
// only what came after the study's own records.
func (v *jview) foldVoided(r store.Record) error {
	var f fRecordsVoided
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	t, err := v.managedTrial(r, f.Trial)
	if err != nil {
		return err
	}
	last := store.Seq(2)
	if n := len(t.voids); n > 0 {
		last = t.voids[n-1][1]
	}
	if store.Seq(f.From) <= last || f.To < f.From || model.CheckName("reason", f.Reason) != nil {
		return corrupt(r, "voids records %d to %d of trial %s (reason %q); the range must start after record %d", f.From, f.To, f.Trial, f.Reason, last)
	}
	t.voids = append(t.voids, [2]store.Seq{store.Seq(f.From), store.Seq(f.To)})
	return nil
}
