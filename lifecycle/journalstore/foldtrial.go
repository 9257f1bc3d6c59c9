package journalstore

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

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
	if t.voided(r.Seq) {
		t.head = store.Head{Seq: r.Seq, Hash: r.Hash}
		t.voidEpoch = max(t.voidEpoch, r.Epoch)
		return nil
	}
	if r.Case != v.caseID {
		return corrupt(r, "record of trial %s is not stamped with the study's case", t.ID)
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
		t.Lease.State = f.State
		return nil
	}
	if err := t.foldParams(r, f.Params); err != nil {
		return err
	}
	return t.foldStates(r, f.States)
}

// running checks that r is written by the trial's current owner epoch.
func (t *jtrial) running(r store.Record) error {
	if !t.Managed || t.Lease.State != lifecycle.TrialRunning || uint64(r.Epoch) != t.Lease.Epoch {
		return corrupt(r, "%s of trial %s at epoch %d; the trial is %s at epoch %d", r.Kind, t.ID, r.Epoch, t.Lease.State, t.Lease.Epoch)
	}
	return nil
}

func (t *jtrial) foldClaimed(r store.Record) error {
	var f fTrialClaimed
	if err := decodeFields(r, &f); err != nil {
		return err
	}
	if s := t.Lease.State; !t.Managed || (s != lifecycle.TrialWaiting && s != lifecycle.TrialPaused) || uint64(r.Epoch) <= t.Lease.Epoch || model.CheckName("owner", f.Owner) != nil {
		return corrupt(r, "claim of a %s trial at epoch %d (last epoch %d)", s, r.Epoch, t.Lease.Epoch)
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
	t.Lease = lifecycle.LeaseObservation{Trial: t.ID, State: lifecycle.TrialRunning, Owner: f.Owner, Epoch: uint64(r.Epoch), HeartbeatAt: at}
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
	if f.HeartbeatSeq != t.Lease.HeartbeatSeq+1 {
		return corrupt(r, "heartbeat %d after heartbeat %d", f.HeartbeatSeq, t.Lease.HeartbeatSeq)
	}
	at, err := parseTime(r, f.HeartbeatAt)
	if err != nil {
		return err
	}
	t.Lease.HeartbeatSeq, t.Lease.HeartbeatAt = f.HeartbeatSeq, at
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
		if _, ok := t.Inter[s.Step]; ok {
			return corrupt(r, "step %d reported twice", s.Step)
		}
		t.Inter[s.Step] = s.Value
	}
	for k, val := range m.Attrs {
		t.Attrs[k] = json.RawMessage(val)
	}
	if err := t.foldStates(r, m.States); err != nil {
		return err
	}
	if m.Pause {
		t.Lease.State, t.Lease.Owner = lifecycle.TrialPaused, ""
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
		if t.Lease.State != lifecycle.TrialRunning || t.Lease.Epoch != f.OwnerEpoch || uint64(r.Epoch) <= f.OwnerEpoch {
			return corrupt(r, "stale failure of owner epoch %d at epoch %d; the trial is %s at epoch %d", f.OwnerEpoch, r.Epoch, t.Lease.State, t.Lease.Epoch)
		}
	case endAbandoned:
		if t.Lease.State != lifecycle.TrialWaiting {
			return corrupt(r, "abandonment of a %s trial", t.Lease.State)
		}
	}
	if err := t.foldStates(r, f.States); err != nil {
		return err
	}
	t.Lease.State, t.Lease.Owner = f.State, ""
	t.Values = slices.Clone(f.Values)
	t.endEpoch = r.Epoch
	return nil
}

func (t *jtrial) foldParams(r store.Record, ps []jParam) error {
	for _, p := range ps {
		if _, ok := t.Params[p.Name]; ok {
			return corrupt(r, "parameter %q set twice", p.Name)
		}
		t.Params[p.Name] = fromJParam(p)
	}
	return nil
}

// foldStates replaces trial-scope blobs, comparing kind and version first.
func (t *jtrial) foldStates(r store.Record, bs []jBlob) error {
	for _, b := range bs {
		if b.Scope != lifecycle.ScopeTrial {
			return corrupt(r, "trial state %q has scope %q", b.Name, b.Scope)
		}
		if old, ok := t.States[b.Name]; ok && (old.Kind != b.Kind || old.Version != b.Version) {
			return corrupt(r, "trial state %q replaced by another kind or version", b.Name)
		}
		t.States[b.Name] = fromJBlob(b)
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
	return v.byID[lifecycle.TrialID(run.String())]
}

// voided reports whether an operator's repair voided the run's record seq.
func (t *jtrial) voided(seq store.Seq) bool {
	for _, v := range t.voids {
		if v[0] <= seq && seq <= v[1] {
			return true
		}
	}
	return false
}
