// Package model is the state of one study under the trial lifecycle
// contract and the checks every transition makes against it, shared by the
// two implementations: memstore keeps it under one mutex, journalstore
// folds it from journal records and validates each operation against it
// before writing. One copy of the rules keeps the two from drifting; the
// conformance suite (lifecycletest) holds both to them.
//
// Nothing here locks or writes anywhere: callers serialize access to a
// Study, run every check, then apply the writes they staged
// ([StagedWrites]), so that an error leaves no trace.
package model

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/lifecycle"
)

// Study is one study's lifecycle state: its spec, budget counter,
// reservation keys, study-scope (seam) state, finalization claim and the
// order of its outbox records.
type Study struct {
	ID     lifecycle.StudyID
	Spec   lifecycle.StudySpec
	Trials uint64 // trial records, and so the next trial number
	Keys   map[string]lifecycle.ReservationOutcome
	States map[string]lifecycle.StateBlob
	Fin    lifecycle.FinalizationObservation
	Outbox []lifecycle.OutboxKey // index i holds TerminalSeq i+1
}

// Trial is one trial's lifecycle state: its lease, what the owner wrote,
// and its terminal values.
type Trial struct {
	Study         *Study
	ID            lifecycle.TrialID
	Number        uint64
	Managed       bool
	Lease         lifecycle.LeaseObservation
	Params        map[string]lifecycle.Param
	Inter         map[uint64]float64
	Attrs         map[string]json.RawMessage
	Values        []float64
	States        map[string]lifecycle.StateBlob
	ReplacementOf *lifecycle.OutboxEffectKey
}

// Begin refuses to start work for a context that has ended; the lock is
// short, so checking once on entry is enough.
func Begin(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return lifecycle.StorageError(op, err)
	}
	return nil
}

// CheckFinalizer checks that tok is exactly the current holder of st's
// finalization claim.
func CheckFinalizer(op string, st *Study, tok lifecycle.FinalizationToken) error {
	f := st.Fin
	if tok.Study != st.ID || !f.Held || f.Fence != tok.Fence || f.Holder != tok.Holder {
		return lifecycle.NewError(lifecycle.KindLeaseLost, op, "finalization claim of study %q is fence %d held=%t by %q; token is study %q fence %d by %q",
			st.ID, f.Fence, f.Held, f.Holder, tok.Study, tok.Fence, tok.Holder)
	}
	return nil
}

// CheckStudyWriter decides whether an operation may replace study-scope
// (seam) state: before the finalization protocol is active anyone may;
// afterwards only the exact current owner. Release does not deactivate the
// protocol, so a fence of 0 is the only open door.
func CheckStudyWriter(op string, st *Study, owner *lifecycle.FinalizationToken) error {
	if owner != nil {
		return CheckFinalizer(op, st, *owner)
	}
	if st.Fin.Fence > 0 {
		return lifecycle.NewError(lifecycle.KindLeaseLost, op, "study %q finalization protocol is active (fence %d); only the finalization owner may write study state", st.ID, st.Fin.Fence)
	}
	return nil
}

// NewTrial builds the study's next trial; register makes it real. They are
// apart so that an operation can check writes against a trial before it
// consumes a number.
func NewTrial(st *Study, managed bool) *Trial {
	t := &Trial{
		Study:   st,
		ID:      lifecycle.TrialID(ulid.Make().String()),
		Number:  st.Trials,
		Managed: managed,
		Params:  map[string]lifecycle.Param{},
		Inter:   map[uint64]float64{},
		Attrs:   map[string]json.RawMessage{},
		States:  map[string]lifecycle.StateBlob{},
	}
	t.Lease = lifecycle.LeaseObservation{Trial: t.ID, State: lifecycle.TrialWaiting}
	return t
}

// StagedWrites collects the writes of one operation after every check has
// passed; apply performs them. Keeping checks and writes apart is what
// makes "an error writes nothing" hold by construction.
type StagedWrites []func()

// Add stages one write.
func (s *StagedWrites) Add(f func()) { *s = append(*s, f) }

// Apply performs the staged writes in order.
func (s StagedWrites) Apply() {
	for _, f := range s {
		f()
	}
}

// StageBlobs checks blobs against the scopes they would replace and stages
// the replacement; trial receives trial-scope blobs. Constraint blobs are
// allowed only under the trial owner's fence (constraintsOK) and are
// arity-checked.
func StageBlobs(op string, w *StagedWrites, st *Study, trial *Trial, blobs []lifecycle.StateBlob, owner *lifecycle.FinalizationToken, constraintsOK bool) error {
	for _, b := range blobs {
		target := st.States
		if b.Scope == lifecycle.ScopeStudy {
			if err := CheckStudyWriter(op, st, owner); err != nil {
				return err
			}
		} else {
			if b.IsConstraints() {
				if !constraintsOK {
					return lifecycle.NewError(lifecycle.KindConflict, op, "constraint state is written only under the trial owner's fence")
				}
				if err := st.Spec.CheckConstraints(b); err != nil {
					return WithOp(op, err)
				}
			}
			target = trial.States
		}
		if old, ok := target[b.Name]; ok && (old.Kind != b.Kind || old.Version != b.Version) {
			return lifecycle.NewError(lifecycle.KindIncompatible, op, "%s state %q is kind %q version %d; write is kind %q version %d",
				b.Scope, b.Name, old.Kind, old.Version, b.Kind, b.Version)
		}
		b := cloneBlob(b)
		w.Add(func() { target[b.Name] = b })
	}
	return nil
}

// StageParams checks that no parameter changes and stages the new ones.
func StageParams(op string, w *StagedWrites, t *Trial, params []lifecycle.Param) error {
	for _, p := range params {
		p.Distribution = CompactJSON(p.Distribution)
		if old, ok := t.Params[p.Name]; ok {
			if old.Value != p.Value || !bytes.Equal(old.Distribution, p.Distribution) {
				return lifecycle.NewError(lifecycle.KindConflict, op, "parameter %q is already set to a different value", p.Name)
			}
			continue
		}
		w.Add(func() { t.Params[p.Name] = p })
	}
	return nil
}

// CheckEffectReplay accepts a replayed advance into PhaseEffects only if
// every effect it names was published with the same content.
func CheckEffectReplay(op string, rec *lifecycle.OutboxRecord, effects []lifecycle.OutboxEffect) error {
	for _, e := range effects {
		i := slices.IndexFunc(rec.Effects, func(r lifecycle.OutboxEffect) bool { return r.Name == e.Name })
		if i < 0 || !sameEffect(rec.Effects[i], NormalizeEffect(e)) {
			return lifecycle.NewError(lifecycle.KindConflict, op, "effect %q replayed with a different payload", e.Name)
		}
	}
	return nil
}

func sameEffect(a, b lifecycle.OutboxEffect) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// OutboxPage reads one page of st's outbox records, in terminal-sequence
// order, touching only the records it returns: get finds a record by key.
func OutboxPage(op string, st *Study, get func(lifecycle.OutboxKey) *lifecycle.OutboxRecord, req lifecycle.OutboxPageRequest) (lifecycle.OutboxPage, error) {
	horizon, start := uint64(len(st.Outbox)), uint64(0)
	if c := req.Cursor; c != nil {
		switch {
		case c.Study != req.Study:
			return lifecycle.OutboxPage{}, lifecycle.NewError(lifecycle.KindConflict, op, "cursor belongs to study %q", c.Study)
		case c.Horizon > uint64(len(st.Outbox)):
			return lifecycle.OutboxPage{}, lifecycle.NewError(lifecycle.KindConflict, op, "cursor horizon %d is beyond the study's %d records", c.Horizon, len(st.Outbox))
		case c.AfterSeq == 0 || c.AfterSeq > c.Horizon:
			return lifecycle.OutboxPage{}, lifecycle.NewError(lifecycle.KindConflict, op, "cursor position %d is outside 1..%d", c.AfterSeq, c.Horizon)
		case st.Outbox[c.AfterSeq-1] != c.AfterKey:
			return lifecycle.OutboxPage{}, lifecycle.NewError(lifecycle.KindConflict, op, "cursor names %v at position %d, which holds %v", c.AfterKey, c.AfterSeq, st.Outbox[c.AfterSeq-1])
		}
		horizon, start = c.Horizon, c.AfterSeq
	}
	page := lifecycle.OutboxPage{Records: []lifecycle.OutboxRecord{}}
	var used uint64
	i := start
	for ; i < horizon; i++ {
		if uint64(len(page.Records)) == req.MaxRecords {
			break
		}
		rec := get(st.Outbox[i])
		size, err := lifecycle.RecordSize(*rec)
		if err != nil {
			return lifecycle.OutboxPage{}, lifecycle.StorageError(op, err)
		}
		if used+uint64(size) > req.MaxBytes {
			if len(page.Records) == 0 {
				return lifecycle.OutboxPage{}, lifecycle.NewError(lifecycle.KindResourceLimit, op, "record %v is %d bytes, over max_bytes %d", rec.Key, size, req.MaxBytes)
			}
			break
		}
		used += uint64(size)
		page.Records = append(page.Records, CloneRecord(*rec))
	}
	if i < horizon {
		page.Next = &lifecycle.OutboxCursor{Study: st.ID, Horizon: horizon, AfterSeq: i, AfterKey: st.Outbox[i-1]}
	}
	return page, nil
}

// Completion returns rec's completion of the effect named name, or nil.
func Completion(rec *lifecycle.OutboxRecord, name string) *lifecycle.EffectCompletion {
	i := slices.IndexFunc(rec.Completed, func(c lifecycle.EffectCompletion) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	return &rec.Completed[i]
}

// AddCompletion records c in rec, keeping completions in name order.
func AddCompletion(rec *lifecycle.OutboxRecord, c lifecycle.EffectCompletion) {
	rec.Completed = append(rec.Completed, c)
	slices.SortFunc(rec.Completed, func(a, b lifecycle.EffectCompletion) int { return cmp.Compare(a.Name, b.Name) })
}

// Snapshot returns a copy of the study as lifecycle.Inspector shows it.
func (st *Study) Snapshot() lifecycle.Study {
	return lifecycle.Study{
		ID:           st.ID,
		Spec:         st.Spec,
		Trials:       st.Trials,
		TerminalSeq:  uint64(len(st.Outbox)),
		Finalization: st.Fin,
		States:       sortedBlobs(st.States),
	}
}

// Snapshot returns a copy of the trial as lifecycle.Inspector shows it.
func (t *Trial) Snapshot() lifecycle.Trial {
	out := lifecycle.Trial{
		ID:      t.ID,
		Study:   t.Study.ID,
		Number:  t.Number,
		Managed: t.Managed,
		Lease:   t.Lease,
		Values:  slices.Clone(t.Values),
		States:  sortedBlobs(t.States),
	}
	for _, name := range slices.Sorted(maps.Keys(t.Params)) {
		out.Params = append(out.Params, cloneParam(t.Params[name]))
	}
	for _, step := range slices.Sorted(maps.Keys(t.Inter)) {
		out.Intermediate = append(out.Intermediate, lifecycle.IntermediateValue{Step: step, Value: t.Inter[step]})
	}
	if len(t.Attrs) > 0 {
		out.Attrs = make(map[string]json.RawMessage, len(t.Attrs))
		for k, v := range t.Attrs {
			out.Attrs[k] = slices.Clone(v)
		}
	}
	if t.ReplacementOf != nil {
		r := *t.ReplacementOf
		out.ReplacementOf = &r
	}
	return out
}

func sortedBlobs(m map[string]lifecycle.StateBlob) []lifecycle.StateBlob {
	var out []lifecycle.StateBlob
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, cloneBlob(m[name]))
	}
	return out
}

func cloneBlob(b lifecycle.StateBlob) lifecycle.StateBlob {
	if len(b.Data) == 0 {
		b.Data = nil // nil and empty are one value; keep one encoding of it
	} else {
		b.Data = slices.Clone(b.Data)
	}
	return b
}

func cloneParam(p lifecycle.Param) lifecycle.Param {
	p.Distribution = slices.Clone(p.Distribution)
	return p
}

// NormalizeEffect returns e with its JSON compacted, as it is stored and
// compared.
func NormalizeEffect(e lifecycle.OutboxEffect) lifecycle.OutboxEffect {
	e.Payload = CompactJSON(e.Payload)
	if e.Replacement != nil {
		s := lifecycle.ReplacementSpec{MaxTrials: e.Replacement.MaxTrials}
		for _, p := range e.Replacement.Params {
			p.Distribution = CompactJSON(p.Distribution)
			s.Params = append(s.Params, p)
		}
		for _, b := range e.Replacement.States {
			s.States = append(s.States, cloneBlob(b))
		}
		e.Replacement = &s
	}
	return e
}

// CloneRecord returns a deep copy of r, so that a caller cannot change
// stored state through it.
func CloneRecord(r lifecycle.OutboxRecord) lifecycle.OutboxRecord {
	r.Intent.Data = slices.Clone(r.Intent.Data)
	if r.Effects != nil {
		effects := make([]lifecycle.OutboxEffect, len(r.Effects))
		for i, e := range r.Effects {
			effects[i] = NormalizeEffect(e)
		}
		r.Effects = effects
	}
	if r.Completed != nil {
		done := make([]lifecycle.EffectCompletion, len(r.Completed))
		for i, c := range r.Completed {
			if c.Replacement != nil {
				out := *c.Replacement
				c.Replacement = &out
			}
			done[i] = c
		}
		r.Completed = done
	}
	return r
}
