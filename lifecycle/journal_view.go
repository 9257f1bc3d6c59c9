package lifecycle

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// jview is what JournalStorage knows of one study: a fold of the study's
// records and nothing else. It is built by folding the study run and then
// each trial run, and kept current by folding exactly the records each
// operation appends, with the same functions; so the view after any
// operation equals the view a rebuild from the journal produces.
//
// Folding is strict. Each record must be a transition the lifecycle allows
// from the state the records before it built; anything else is a
// corruptError, and nothing is decided from a history that does not fold.
type jview struct {
	memStudy
	caseID store.CaseID
	run    store.RunID // the study run; its id is the case's ULID
	epoch  store.Epoch // the study run's lease epoch, fixed at creation
	head   store.Head  // the study run's head as folded
	byID   map[TrialID]*jtrial
	order  []*jtrial // by number
	// records are the outbox records, by key; memStudy.outbox orders them
	// by terminal sequence.
	records map[OutboxKey]*OutboxRecord
	// foreign lists runs that carry the case but are neither the study run
	// nor one of its trials. They are not the study's, and are shown, not
	// folded.
	foreign []store.RunID
	// onTrial is told of every trial the study reserves.
	onTrial func(TrialID)
	// todo are the authorities folded since the last settle, and dirty the
	// trials with overlays to fold: the work a settle does next.
	todo  []*authority
	dirty []*jtrial
	// toSeal are the trials whose run concluded, until sealed.
	toSeal []*jtrial
}

// jtrial is one trial of a jview.
type jtrial struct {
	memTrial
	run      store.RunID
	head     store.Head  // the trial run's head as folded
	runEpoch store.Epoch // the epoch of the trial run's last record
	// ended is set by the study run's TrialTerminal, the commit point of
	// the trial's end; the trial run's mirror of it follows.
	ended bool
	// endEpoch is the epoch of the trial run's TrialTerminal, the fence its
	// seal is made under; zero until that record is folded.
	endEpoch store.Epoch
	// concluded is set once the trial run's RunConcluded is folded.
	concluded bool
	sealed    bool
	// awaiting are the study run records whose mirror in this trial run is
	// not folded yet, oldest first.
	awaiting []*authority
	// overlays are trial-scope blobs the study run writes after the trial
	// ended (outbox state, finalized state), folded after the trial run.
	overlays []overlay
}

type overlay struct {
	rec  store.Record
	blob jBlob
}

// authority is a study run record that commits a transition of a trial
// run, and the exact records that mirror it there.
type authority struct {
	rec    store.Record
	mirror []store.Append
	// epoch is the trial run epoch the mirror is appended under: the
	// owner's for an owner's transition, 1 for a new run, and 0 for a
	// transition by a non-owner, which takes a fresh lease first.
	epoch store.Epoch
	// released is the owner epoch whose lease the mirror's transition ends
	// (a pause or terminal of the owner, a stale failure); 0 for none.
	released store.Epoch
	// trial is the trial whose run the mirror goes to.
	trial *jtrial
	// done is set when the mirror is folded.
	done bool
}

func newView(c store.CaseID, onTrial func(TrialID)) *jview {
	id := StudyID(c.String())
	return &jview{
		memStudy: memStudy{
			id:     id,
			keys:   map[string]ReservationOutcome{},
			states: map[string]StateBlob{},
			fin:    FinalizationObservation{Study: id},
		},
		caseID:  c,
		run:     store.RunID(c),
		byID:    map[TrialID]*jtrial{},
		records: map[OutboxKey]*OutboxRecord{},
		onTrial: onTrial,
	}
}

// studyRunID is the run of a study's own records: the case's ULID, so that
// the study run is found from the study id without a search.
func studyRunID(c store.CaseID) store.RunID { return store.RunID(c) }

// checkChain checks that r extends head in run: the view folds only a
// contiguous chain, so a record appended by anyone else shows up as a gap.
func checkChain(head store.Head, run store.RunID, r store.Record) error {
	if r.Run != run || r.Seq != head.Seq+1 || r.PrevHash != head.Hash {
		return corrupt(r, "does not extend the folded head (run %s seq %d): another writer appended to the study", run, head.Seq)
	}
	return nil
}

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
		v.spec = f.Spec
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
	case RecordFinalizationAcquired:
		var f fFinalizationAcquired
		if err = decodeFields(r, &f); err == nil {
			if f.Fence != v.fin.Fence+1 || checkName("holder", f.Holder) != nil {
				err = corrupt(r, "acquisition at fence %d by %q; the claim is at fence %d", f.Fence, f.Holder, v.fin.Fence)
			} else {
				v.fin.Fence, v.fin.Held, v.fin.Holder = f.Fence, true, f.Holder
			}
		}
	case RecordFinalizationRenewed:
		var f fFinalizationRenewed
		if err = decodeFields(r, &f); err == nil {
			if !v.fin.Held || f.Fence != v.fin.Fence || f.HeartbeatSeq != v.fin.HeartbeatSeq+1 {
				err = corrupt(r, "renewal of fence %d to heartbeat %d; the claim is %+v", f.Fence, f.HeartbeatSeq, v.fin)
			} else {
				v.fin.HeartbeatSeq = f.HeartbeatSeq
			}
		}
	case RecordFinalizationReleased:
		var f fFinalizationReleased
		if err = decodeFields(r, &f); err == nil {
			if !v.fin.Held || f.Fence != v.fin.Fence {
				err = corrupt(r, "release of fence %d; the claim is %+v", f.Fence, v.fin)
			} else {
				v.fin.Held, v.fin.Holder = false, ""
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
				if f.State.Scope != ScopeTrial || f.State.Name == ConstraintsStateName {
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

func (v *jview) managedTrial(r store.Record, id TrialID) (*jtrial, error) {
	t := v.byID[id]
	if t == nil || !t.managed {
		return nil, corrupt(r, "names trial %q, which is not a managed trial of the study", id)
	}
	return t, nil
}

// endedTrial finds a trial whose end the study run committed.
func (v *jview) endedTrial(r store.Record, id TrialID) (*jtrial, error) {
	t, err := v.managedTrial(r, id)
	if err == nil && !t.ended {
		err = corrupt(r, "writes finalized state of trial %q, which has not ended", id)
	}
	return t, err
}

// addTrial registers a reserved trial. Its run's first records, the mirror
// of the reservation, follow.
func (v *jview) addTrial(r store.Record, id TrialID, number uint64, managed bool) (*jtrial, error) {
	run, err := store.ParseRunID(string(id))
	if err != nil || run.IsZero() || run.String() != string(id) || run == v.run {
		return nil, corrupt(r, "trial id %q is not a fresh run id", id)
	}
	if v.byID[id] != nil {
		return nil, corrupt(r, "trial %q reserved twice", id)
	}
	if number != v.memStudy.trials {
		return nil, corrupt(r, "trial number %d; the study holds %d trial records", number, v.memStudy.trials)
	}
	t := &jtrial{
		memTrial: memTrial{
			study:   &v.memStudy,
			id:      id,
			number:  number,
			managed: managed,
			params:  map[string]Param{},
			inter:   map[uint64]float64{},
			attrs:   map[string]json.RawMessage{},
			states:  map[string]StateBlob{},
		},
		run: run,
	}
	t.lease = LeaseObservation{Trial: id, State: TrialWaiting}
	v.memStudy.trials++
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
		if _, ok := v.keys[f.Key]; ok || checkName("reservation key", f.Key) != nil {
			return corrupt(r, "reservation key %q reused or malformed", f.Key)
		}
	}
	t, err := v.addTrial(r, f.Trial, f.Number, f.Managed)
	if err != nil {
		return err
	}
	if f.Key != "" {
		v.keys[f.Key] = ReservationOutcome{Status: ReservationCreated, Trial: t.id, Number: t.number}
	}
	created := fTrialCreated{Authority: refOf(r), Number: f.Number, Managed: f.Managed, State: f.State}
	return v.await(t, r, 1, 0, creationMirror(v.caseID, t.run, created))
}

// creationMirror is the batch that opens a trial run.
func creationMirror(c store.CaseID, run store.RunID, f fTrialCreated) func() ([]store.Append, error) {
	return func() ([]store.Append, error) {
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

// await registers the mirror that r's transition owes trial t's run.
func (v *jview) await(t *jtrial, r store.Record, epoch, released store.Epoch, mirror func() ([]store.Append, error)) error {
	m, err := mirror()
	if err != nil {
		return err
	}
	a := &authority{rec: r, mirror: m, epoch: epoch, released: released, trial: t}
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
	if fence == 0 && v.fin.Fence > 0 {
		return corrupt(r, "writes study state without the finalization owner after the protocol became active")
	}
	if err := v.checkFence(r, fence); err != nil {
		return err
	}
	for _, b := range blobs {
		if b.Scope != ScopeStudy {
			return corrupt(r, "study state %q has scope %q", b.Name, b.Scope)
		}
		if old, ok := v.states[b.Name]; ok && (old.Kind != b.Kind || old.Version != b.Version) {
			return corrupt(r, "study state %q replaced by another kind or version", b.Name)
		}
		v.states[b.Name] = fromJBlob(b)
	}
	return nil
}

// checkFence checks a record made under a finalization token: the token
// must have been the exact holder's.
func (v *jview) checkFence(r store.Record, fence uint64) error {
	if fence != 0 && (!v.fin.Held || v.fin.Fence != fence) {
		return corrupt(r, "made under finalization fence %d; the claim is %+v", fence, v.fin)
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
	return v.await(t, r, store.Epoch(f.OwnerEpoch), released, func() ([]store.Append, error) {
		ref := refOf(r)
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
	if !f.State.Terminal() || v.spec.CheckValues(f.State, f.Values) != nil {
		return corrupt(r, "terminal state %q with %d values", f.State, len(f.Values))
	}
	var epoch, released store.Epoch
	switch f.Cause {
	case endTerminal:
		epoch, released = store.Epoch(f.OwnerEpoch), store.Epoch(f.OwnerEpoch)
	case endStale:
		released = store.Epoch(f.OwnerEpoch)
		if f.Intent == nil || f.GraceNS <= 0 || f.State != TrialFailed || len(f.States)+len(f.StudyStates) > 0 {
			return corrupt(r, "stale failure without an intent or grace, or with state")
		}
	case endAbandoned:
		if f.Intent != nil || f.OwnerEpoch != 0 || f.State != TrialFailed || len(f.States)+len(f.StudyStates) > 0 {
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
		if f.TerminalSeq != uint64(len(v.outbox))+1 || (FinalizationIntent{Kind: f.Intent.Kind}).Validate() != nil {
			return corrupt(r, "outbox record at terminal sequence %d; the study has %d", f.TerminalSeq, len(v.outbox))
		}
		key := OutboxKey{Trial: t.id, Epoch: f.OwnerEpoch}
		cause := CauseTerminal
		if f.Cause == endStale {
			cause = CauseStale
		}
		v.outbox = append(v.outbox, key)
		v.records[key] = &OutboxRecord{
			Key:         key,
			Study:       v.id,
			TerminalSeq: f.TerminalSeq,
			Outcome:     f.State,
			Cause:       cause,
			Grace:       time.Duration(f.GraceNS),
			Intent:      fromJIntent(*f.Intent),
			Phase:       PhaseInitial,
		}
	} else if f.TerminalSeq != 0 {
		return corrupt(r, "terminal sequence without an outbox intent")
	}
	t.ended = true
	mirror := fTrialTerminal{Authority: refOf(r), OwnerEpoch: f.OwnerEpoch, State: f.State, Cause: f.Cause, Values: f.Values, States: f.States}
	return v.await(t, r, epoch, released, func() ([]store.Append, error) {
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

func (v *jview) outboxRecord(r store.Record, trial TrialID, epoch uint64) (*OutboxRecord, error) {
	rec := v.records[OutboxKey{Trial: trial, Epoch: epoch}]
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
	if f.Phase.Rank() != rec.Phase.Rank()+1 || (rec.Phase == PhaseEffects && len(rec.Completed) < len(rec.Effects)) ||
		(len(f.Effects) > 0 && f.Phase != PhaseEffects) {
		return corrupt(r, "advance of %v from %s to %s", rec.Key, rec.Phase, f.Phase)
	}
	if f.FinalizerFence == 0 && v.fin.Fence > 0 {
		return corrupt(r, "advance without the finalization owner after the protocol became active")
	}
	var study []jBlob
	t := v.byID[f.Trial]
	for _, b := range f.States {
		if b.Scope == ScopeStudy {
			study = append(study, b)
		} else if b.Scope != ScopeTrial || b.Name == ConstraintsStateName {
			return corrupt(r, "outbox state %s/%q", b.Scope, b.Name)
		} else {
			t.addOverlay(v, r, b)
		}
	}
	if err := v.applyStudyStates(r, study, f.FinalizerFence); err != nil {
		return err
	}
	if f.Phase == PhaseEffects {
		rec.Effects = make([]OutboxEffect, 0, len(f.Effects))
		for _, e := range f.Effects {
			rec.Effects = append(rec.Effects, fromJEffect(e))
		}
		if !slices.IsSortedFunc(rec.Effects, func(a, b OutboxEffect) int { return cmp.Compare(a.Name, b.Name) }) {
			return corrupt(r, "effects are not in name order")
		}
	}
	rec.Phase = f.Phase
	return nil
}

func (v *jview) effect(r store.Record, trial TrialID, epoch uint64, name string, kind EffectKind) (*OutboxRecord, error) {
	rec, err := v.outboxRecord(r, trial, epoch)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(rec.Effects, func(e OutboxEffect) bool { return e.Name == name })
	if i < 0 || rec.Effects[i].Kind != kind || completion(rec, name) != nil {
		return nil, corrupt(r, "completes effect %q of %v, which is not an open %s effect", name, rec.Key, kind)
	}
	return rec, nil
}

func (v *jview) foldCompleted(r store.Record) error {
	var f fEffectCompleted
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	rec, err := v.effect(r, f.Trial, f.OwnerEpoch, f.Name, EffectExternal)
	if err != nil {
		return err
	}
	addCompletion(rec, EffectCompletion{Name: f.Name})
	return nil
}

func (v *jview) foldReplacement(r store.Record) error {
	var f fReplacementCreated
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	rec, err := v.effect(r, f.Trial, f.OwnerEpoch, f.Name, EffectReplacement)
	if err != nil {
		return err
	}
	key := OutboxEffectKey{Outbox: rec.Key, Name: f.Name}
	switch f.Status {
	case ReplacementExhausted:
		if f.NewTrial != "" || f.Number != 0 || len(f.Params)+len(f.States) > 0 {
			return corrupt(r, "exhausted replacement names a trial")
		}
		out := ReplacementOutcome{Status: ReplacementExhausted}
		addCompletion(rec, EffectCompletion{Name: f.Name, Replacement: &out})
		return nil
	case ReplacementCreated:
	default:
		return corrupt(r, "replacement status %q", f.Status)
	}
	t, err := v.addTrial(r, f.NewTrial, f.Number, true)
	if err != nil {
		return err
	}
	t.replacementOf = &key
	out := ReplacementOutcome{Status: ReplacementCreated, Trial: t.id, Number: t.number}
	addCompletion(rec, EffectCompletion{Name: f.Name, Replacement: &out})
	created := fTrialCreated{
		Authority: refOf(r), Number: f.Number, Managed: true, Params: f.Params, States: f.States,
		ReplacementOf: &jEffectKey{Trial: f.Trial, OwnerEpoch: f.OwnerEpoch, Name: f.Name},
	}
	return v.await(t, r, 1, 0, creationMirror(v.caseID, t.run, created))
}

// sameAppend reports whether r is exactly what a would have written.
func sameAppend(r store.Record, a store.Append) bool {
	if r.Kind != a.Kind || r.Case != a.Case || r.Step != nil || r.Phase != store.Forward || r.EffectKey != nil {
		return false
	}
	want, err := canon.Canonicalize(a.Fields)
	return err == nil && bytes.Equal(want, r.Fields)
}

// applyTrial folds one trial run record into t.
func (v *jview) applyTrial(t *jtrial, r store.Record) error {
	if err := checkChain(t.head, t.run, r); err != nil {
		return err
	}
	if r.Case != v.caseID {
		return corrupt(r, "record of trial %s is not stamped with the study's case", t.id)
	}
	if r.Epoch < t.runEpoch {
		return corrupt(r, "epoch %d after epoch %d: lease epochs never decrease", r.Epoch, t.runEpoch)
	}
	if t.concluded {
		return corrupt(r, "record after the trial run concluded")
	}
	// The mirror of the oldest awaiting authority, and the position in it
	// this record must be if it belongs to a mirror.
	var auth *authority
	if len(t.awaiting) > 0 {
		auth = t.awaiting[0]
	}
	mirrorAt := func(i int) error {
		if auth == nil || i >= len(auth.mirror) || !sameAppend(r, auth.mirror[i]) {
			return corrupt(r, "%s is not the mirror the study run's records call for", r.Kind)
		}
		return nil
	}
	var err error
	switch r.Kind {
	case store.KindRunAdmitted:
		if r.Seq != 1 {
			err = corrupt(r, "RunAdmitted after the run began")
		} else {
			err = mirrorAt(0)
		}
	case RecordTrialCreated:
		if r.Seq != 2 {
			err = corrupt(r, "TrialCreated is not the run's second record")
		} else if err = mirrorAt(1); err == nil {
			err = t.foldCreated(r)
			t.popAwaiting()
		}
	case RecordTrialClaimed:
		err = t.foldClaimed(r)
	case RecordTrialHeartbeat:
		err = t.foldHeartbeat(r)
	case RecordTrialMutated:
		var f fTrialMutated
		if err = decodeFields(r, &f); err != nil {
			break
		}
		if f.Authority != nil {
			if err = mirrorAt(0); err != nil {
				break
			}
			t.popAwaiting()
		}
		err = t.foldMutation(r, f.jMutation)
	case RecordTrialTerminal:
		if err = mirrorAt(0); err == nil {
			err = t.foldTerminal(r)
		}
	case store.KindRunConcluded:
		if t.endEpoch == 0 {
			err = corrupt(r, "RunConcluded before TrialTerminal")
		} else if err = mirrorAt(1); err == nil {
			t.concluded = true
			t.popAwaiting()
			v.toSeal = append(v.toSeal, t)
		}
	default:
		err = corrupt(r, "kind %s has no place in a trial run", r.Kind)
	}
	if err != nil {
		return err
	}
	if t.head.Seq == 0 && r.Kind != store.KindRunAdmitted {
		return corrupt(r, "a trial run opens with RunAdmitted")
	}
	t.head = store.Head{Seq: r.Seq, Hash: r.Hash}
	t.runEpoch = r.Epoch
	return nil
}

func (t *jtrial) popAwaiting() {
	t.awaiting[0].done = true
	t.awaiting = t.awaiting[1:]
}

func (t *jtrial) foldCreated(r store.Record) error {
	var f fTrialCreated
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	if !f.Managed {
		t.lease.State = f.State
		return nil
	}
	if err := t.foldParams(r, f.Params); err != nil {
		return err
	}
	return t.foldStates(r, f.States)
}

// running checks that r is written by the trial's current owner epoch.
func (t *jtrial) running(r store.Record) error {
	if !t.managed || t.lease.State != TrialRunning || uint64(r.Epoch) != t.lease.Epoch {
		return corrupt(r, "%s of trial %s at epoch %d; the trial is %s at epoch %d", r.Kind, t.id, r.Epoch, t.lease.State, t.lease.Epoch)
	}
	return nil
}

func (t *jtrial) foldClaimed(r store.Record) error {
	var f fTrialClaimed
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	if s := t.lease.State; !t.managed || (s != TrialWaiting && s != TrialPaused) || uint64(r.Epoch) <= t.lease.Epoch || checkName("owner", f.Owner) != nil {
		return corrupt(r, "claim of a %s trial at epoch %d (last epoch %d)", s, r.Epoch, t.lease.Epoch)
	}
	at, err := parseTime(r, f.HeartbeatAt)
	if err != nil {
		return err
	}
	if err := t.foldParams(r, f.Params); err != nil {
		return err
	}
	if err := t.foldStates(r, f.States); err != nil {
		return err
	}
	t.lease = LeaseObservation{Trial: t.id, State: TrialRunning, Owner: f.Owner, Epoch: uint64(r.Epoch), HeartbeatAt: at}
	return nil
}

func (t *jtrial) foldHeartbeat(r store.Record) error {
	var f fTrialHeartbeat
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	if err := t.running(r); err != nil {
		return err
	}
	if f.HeartbeatSeq != t.lease.HeartbeatSeq+1 {
		return corrupt(r, "heartbeat %d after heartbeat %d", f.HeartbeatSeq, t.lease.HeartbeatSeq)
	}
	at, err := parseTime(r, f.HeartbeatAt)
	if err != nil {
		return err
	}
	t.lease.HeartbeatSeq, t.lease.HeartbeatAt = f.HeartbeatSeq, at
	return nil
}

func (t *jtrial) foldMutation(r store.Record, m jMutation) error {
	if err := t.running(r); err != nil {
		return err
	}
	if err := t.foldParams(r, m.Params); err != nil {
		return err
	}
	for _, s := range m.Intermediate {
		if _, ok := t.inter[s.Step]; ok {
			return corrupt(r, "step %d reported twice", s.Step)
		}
		t.inter[s.Step] = s.Value
	}
	for k, val := range m.Attrs {
		t.attrs[k] = json.RawMessage(val)
	}
	if err := t.foldStates(r, m.States); err != nil {
		return err
	}
	if m.Pause {
		t.lease.State, t.lease.Owner = TrialPaused, ""
	}
	return nil
}

func (t *jtrial) foldTerminal(r store.Record) error {
	var f fTrialTerminal
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	switch f.Cause {
	case endTerminal:
		if err := t.running(r); err != nil {
			return err
		}
	case endStale:
		if t.lease.State != TrialRunning || t.lease.Epoch != f.OwnerEpoch || uint64(r.Epoch) <= f.OwnerEpoch {
			return corrupt(r, "stale failure of owner epoch %d at epoch %d; the trial is %s at epoch %d", f.OwnerEpoch, r.Epoch, t.lease.State, t.lease.Epoch)
		}
	case endAbandoned:
		if t.lease.State != TrialWaiting {
			return corrupt(r, "abandonment of a %s trial", t.lease.State)
		}
	}
	if err := t.foldStates(r, f.States); err != nil {
		return err
	}
	t.lease.State, t.lease.Owner = f.State, ""
	t.values = slices.Clone(f.Values)
	t.endEpoch = r.Epoch
	return nil
}

func (t *jtrial) foldParams(r store.Record, ps []jParam) error {
	for _, p := range ps {
		if _, ok := t.params[p.Name]; ok {
			return corrupt(r, "parameter %q set twice", p.Name)
		}
		t.params[p.Name] = fromJParam(p)
	}
	return nil
}

// foldStates replaces trial-scope blobs, comparing kind and version first.
func (t *jtrial) foldStates(r store.Record, bs []jBlob) error {
	for _, b := range bs {
		if b.Scope != ScopeTrial {
			return corrupt(r, "trial state %q has scope %q", b.Name, b.Scope)
		}
		if old, ok := t.states[b.Name]; ok && (old.Kind != b.Kind || old.Version != b.Version) {
			return corrupt(r, "trial state %q replaced by another kind or version", b.Name)
		}
		t.states[b.Name] = fromJBlob(b)
	}
	return nil
}

func (t *jtrial) addOverlay(v *jview, r store.Record, b jBlob) {
	if len(t.overlays) == 0 {
		v.dirty = append(v.dirty, t)
	}
	t.overlays = append(t.overlays, overlay{rec: r, blob: b})
}

// flushOverlays folds the trial-scope state the study run wrote after the
// trial ended. They come after every record of the trial run: the run is
// sealed once it ends, so nothing of it can follow them.
func (t *jtrial) flushOverlays() error {
	for _, o := range t.overlays {
		if err := t.foldStates(o.rec, []jBlob{o.blob}); err != nil {
			return err
		}
	}
	t.overlays = nil
	return nil
}

func (v *jview) trialFor(run store.RunID) *jtrial {
	return v.byID[TrialID(run.String())]
}
