package lifecycle

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// MemStorage is the in-memory reference implementation of [Storage] and
// [Inspector]. One mutex is its transaction: every method validates
// everything, then writes, under the lock, so an error leaves no trace. It
// holds every study in memory for the life of the value and is safe for
// concurrent use. Create one with NewMemStorage; the zero value is not
// usable.
//
// MemStorage is the executable reading of spec/lifecycle.md. Where a
// journal-backed store and MemStorage disagree, the conformance suite
// (package lifecycletest) decides.
type MemStorage struct {
	mu      sync.Mutex
	studies map[StudyID]*memStudy
	trials  map[TrialID]*memTrial
	outbox  map[OutboxKey]*OutboxRecord
}

type memStudy struct {
	id     StudyID
	spec   StudySpec
	trials uint64 // trial records, and so the next trial number
	keys   map[string]ReservationOutcome
	states map[string]StateBlob
	fin    FinalizationObservation
	outbox []OutboxKey // index i holds TerminalSeq i+1
}

type memTrial struct {
	study         *memStudy
	id            TrialID
	number        uint64
	managed       bool
	lease         LeaseObservation
	params        map[string]Param
	inter         map[uint64]float64
	attrs         map[string]json.RawMessage
	values        []float64
	states        map[string]StateBlob
	replacementOf *OutboxEffectKey
}

var _ interface {
	Storage
	Inspector
} = (*MemStorage)(nil)

// NewMemStorage returns an empty store.
func NewMemStorage() *MemStorage {
	return &MemStorage{
		studies: map[StudyID]*memStudy{},
		trials:  map[TrialID]*memTrial{},
		outbox:  map[OutboxKey]*OutboxRecord{},
	}
}

// begin refuses to start work for a context that has ended; the lock is
// short, so checking once on entry is enough.
func begin(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return StorageError(op, err)
	}
	return nil
}

// CreateStudy creates a study. It stands in for the surrounding study
// storage, which owns study creation; the lifecycle contract has none.
func (m *MemStorage) CreateStudy(ctx context.Context, spec StudySpec) (StudyID, error) {
	const op = "create_study"
	if err := begin(ctx, op); err != nil {
		return "", err
	}
	if err := spec.Validate(); err != nil {
		return "", withOp(op, err)
	}
	id := StudyID(ulid.Make().String())
	m.mu.Lock()
	defer m.mu.Unlock()
	m.studies[id] = &memStudy{
		id:     id,
		spec:   spec,
		keys:   map[string]ReservationOutcome{},
		states: map[string]StateBlob{},
		fin:    FinalizationObservation{Study: id},
	}
	return id, nil
}

// CreateUnmanagedTrial creates a trial in the given state outside the
// lifecycle protocol, as plain study CRUD (an imported or legacy trial)
// would. It consumes a trial number. Every lifecycle operation addressed
// to it answers KindUnsupported.
func (m *MemStorage) CreateUnmanagedTrial(ctx context.Context, study StudyID, state TrialState) (TrialID, error) {
	const op = "create_unmanaged_trial"
	if err := begin(ctx, op); err != nil {
		return "", err
	}
	if !state.Valid() {
		return "", NewError(KindInvalid, op, "unknown state %q", state)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, study)
	if err != nil {
		return "", err
	}
	t := newTrial(st, false)
	t.lease.State = state
	m.register(t)
	return t.id, nil
}

func (m *MemStorage) study(op string, id StudyID) (*memStudy, error) {
	st := m.studies[id]
	if st == nil {
		return nil, NewError(KindNotFound, op, "study %q", id)
	}
	return st, nil
}

// managedTrial finds a trial the lifecycle protocol governs.
func (m *MemStorage) managedTrial(op string, id TrialID) (*memTrial, error) {
	t := m.trials[id]
	if t == nil {
		return nil, NewError(KindNotFound, op, "trial %q", id)
	}
	if !t.managed {
		return nil, NewError(KindUnsupported, op, "trial %q is not lifecycle-managed", id)
	}
	return t, nil
}

// ownedTrial finds a trial and checks that tok is exactly its current owner.
func (m *MemStorage) ownedTrial(op string, tok TrialOwnerToken) (*memTrial, error) {
	t, err := m.managedTrial(op, tok.Trial)
	if err != nil {
		return nil, err
	}
	l := t.lease
	if l.State != TrialRunning || l.Owner != tok.Owner || l.Epoch != tok.Epoch {
		return nil, NewError(KindLeaseLost, op, "trial %q is %s under owner %q epoch %d; token is owner %q epoch %d",
			t.id, l.State, l.Owner, l.Epoch, tok.Owner, tok.Epoch)
	}
	return t, nil
}

// checkFinalizer checks that tok is exactly the current holder of st's
// finalization claim.
func checkFinalizer(op string, st *memStudy, tok FinalizationToken) error {
	f := st.fin
	if tok.Study != st.id || !f.Held || f.Fence != tok.Fence || f.Holder != tok.Holder {
		return NewError(KindLeaseLost, op, "finalization claim of study %q is fence %d held=%t by %q; token is study %q fence %d by %q",
			st.id, f.Fence, f.Held, f.Holder, tok.Study, tok.Fence, tok.Holder)
	}
	return nil
}

// checkStudyWriter decides whether an operation may replace study-scope
// (seam) state: before the finalization protocol is active anyone may;
// afterwards only the exact current owner. Release does not deactivate the
// protocol, so a fence of 0 is the only open door.
func checkStudyWriter(op string, st *memStudy, owner *FinalizationToken) error {
	if owner != nil {
		return checkFinalizer(op, st, *owner)
	}
	if st.fin.Fence > 0 {
		return NewError(KindLeaseLost, op, "study %q finalization protocol is active (fence %d); only the finalization owner may write study state", st.id, st.fin.Fence)
	}
	return nil
}

// newTrial builds the study's next trial; register makes it real. They are
// apart so that an operation can check writes against a trial before it
// consumes a number.
func newTrial(st *memStudy, managed bool) *memTrial {
	t := &memTrial{
		study:   st,
		id:      TrialID(ulid.Make().String()),
		number:  st.trials,
		managed: managed,
		params:  map[string]Param{},
		inter:   map[uint64]float64{},
		attrs:   map[string]json.RawMessage{},
		states:  map[string]StateBlob{},
	}
	t.lease = LeaseObservation{Trial: t.id, State: TrialWaiting}
	return t
}

func (m *MemStorage) register(t *memTrial) {
	t.study.trials++
	m.trials[t.id] = t
}

// stagedWrites collects the writes of one operation after every check has
// passed; apply performs them. Keeping checks and writes apart is what
// makes "an error writes nothing" hold by construction.
type stagedWrites []func()

func (s *stagedWrites) add(f func()) { *s = append(*s, f) }

func (s stagedWrites) apply() {
	for _, f := range s {
		f()
	}
}

// stageBlobs checks blobs against the scopes they would replace and stages
// the replacement; trial receives trial-scope blobs. Constraint blobs are
// allowed only under the trial owner's fence (constraintsOK) and are
// arity-checked.
func stageBlobs(op string, w *stagedWrites, st *memStudy, trial *memTrial, blobs []StateBlob, owner *FinalizationToken, constraintsOK bool) error {
	for _, b := range blobs {
		target := st.states
		if b.Scope == ScopeStudy {
			if err := checkStudyWriter(op, st, owner); err != nil {
				return err
			}
		} else {
			if b.IsConstraints() {
				if !constraintsOK {
					return NewError(KindConflict, op, "constraint state is written only under the trial owner's fence")
				}
				if err := st.spec.CheckConstraints(b); err != nil {
					return withOp(op, err)
				}
			}
			target = trial.states
		}
		if old, ok := target[b.Name]; ok && (old.Kind != b.Kind || old.Version != b.Version) {
			return NewError(KindIncompatible, op, "%s state %q is kind %q version %d; write is kind %q version %d",
				b.Scope, b.Name, old.Kind, old.Version, b.Kind, b.Version)
		}
		b := cloneBlob(b)
		w.add(func() { target[b.Name] = b })
	}
	return nil
}

// stageParams checks that no parameter changes and stages the new ones.
func stageParams(op string, w *stagedWrites, t *memTrial, params []Param) error {
	for _, p := range params {
		p.Distribution = compactJSON(p.Distribution)
		if old, ok := t.params[p.Name]; ok {
			if old.Value != p.Value || !bytes.Equal(old.Distribution, p.Distribution) {
				return NewError(KindConflict, op, "parameter %q is already set to a different value", p.Name)
			}
			continue
		}
		w.add(func() { t.params[p.Name] = p })
	}
	return nil
}

// ReserveAndCreateIfBudget implements [Storage].
func (m *MemStorage) ReserveAndCreateIfBudget(ctx context.Context, req ReserveAndCreateRequest) (ReservationOutcome, error) {
	const op = "reserve_and_create_if_budget"
	if err := begin(ctx, op); err != nil {
		return ReservationOutcome{}, err
	}
	if err := req.Validate(); err != nil {
		return ReservationOutcome{}, withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, req.Study)
	if err != nil {
		return ReservationOutcome{}, err
	}
	if req.Key != "" {
		if out, ok := st.keys[req.Key]; ok {
			return out, nil
		}
	}
	if st.trials >= req.MaxTrials {
		return ReservationOutcome{Status: ReservationExhausted}, nil
	}
	t := newTrial(st, true)
	m.register(t)
	out := ReservationOutcome{Status: ReservationCreated, Trial: t.id, Number: t.number}
	if req.Key != "" {
		st.keys[req.Key] = out
	}
	return out, nil
}

// Abandon implements [Storage].
func (m *MemStorage) Abandon(ctx context.Context, req AbandonRequest) (bool, error) {
	const op = "abandon"
	if err := begin(ctx, op); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, req.Trial)
	if err != nil {
		return false, err
	}
	if t.lease.State != TrialWaiting {
		return false, nil
	}
	t.lease.State = TrialFailed
	return true, nil
}

// Observe implements [Storage].
func (m *MemStorage) Observe(ctx context.Context, trial TrialID) (LeaseObservation, error) {
	const op = "observe"
	if err := begin(ctx, op); err != nil {
		return LeaseObservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, trial)
	if err != nil {
		return LeaseObservation{}, err
	}
	return t.lease, nil
}

// Claim implements [Storage].
func (m *MemStorage) Claim(ctx context.Context, req ClaimRequest) (TrialOwnerToken, error) {
	const op = "claim"
	if err := begin(ctx, op); err != nil {
		return TrialOwnerToken{}, err
	}
	if err := req.Validate(); err != nil {
		return TrialOwnerToken{}, withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, req.Trial)
	if err != nil {
		return TrialOwnerToken{}, err
	}
	if s := t.lease.State; s != TrialWaiting && s != TrialPaused {
		return TrialOwnerToken{}, NewError(KindLeaseLost, op, "trial %q is %s, not claimable", t.id, s)
	}
	var w stagedWrites
	if err := stageParams(op, &w, t, req.Params); err != nil {
		return TrialOwnerToken{}, err
	}
	if err := stageBlobs(op, &w, t.study, t, req.States, nil, true); err != nil {
		return TrialOwnerToken{}, err
	}
	w.apply()
	t.lease = LeaseObservation{
		Trial:       t.id,
		State:       TrialRunning,
		Owner:       req.Owner,
		Epoch:       t.lease.Epoch + 1,
		HeartbeatAt: req.HeartbeatAt.Round(0),
	}
	return TrialOwnerToken{Trial: t.id, Owner: req.Owner, Epoch: t.lease.Epoch}, nil
}

// Renew implements [Storage].
func (m *MemStorage) Renew(ctx context.Context, req RenewRequest) (LeaseObservation, error) {
	const op = "renew"
	if err := begin(ctx, op); err != nil {
		return LeaseObservation{}, err
	}
	if err := req.Validate(); err != nil {
		return LeaseObservation{}, withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.ownedTrial(op, req.Owner)
	if err != nil {
		return LeaseObservation{}, err
	}
	t.lease.HeartbeatSeq++
	t.lease.HeartbeatAt = req.HeartbeatAt.Round(0)
	return t.lease, nil
}

// FailStale implements [Storage]. It reads no clock: the comparison is
// between the caller's observation and the current lease, nothing else.
func (m *MemStorage) FailStale(ctx context.Context, req FailStaleRequest) (bool, error) {
	const op = "fail_stale"
	if err := begin(ctx, op); err != nil {
		return false, err
	}
	if err := req.Validate(); err != nil {
		return false, withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, req.Observed.Trial)
	if err != nil {
		return false, err
	}
	if t.lease.State != TrialRunning || !t.lease.Equal(req.Observed) {
		return false, nil
	}
	key := OutboxKey{Trial: t.id, Epoch: t.lease.Epoch}
	if _, ok := m.outbox[key]; ok {
		// A running epoch cannot have ended already; refuse rather than
		// overwrite evidence.
		return false, NewError(KindStorage, op, "outbox record %v exists for a running epoch", key)
	}
	t.lease.State = TrialFailed
	t.lease.Owner = ""
	m.addOutbox(t, key, TrialFailed, CauseStale, req.Grace, req.Intent)
	return true, nil
}

// addOutbox inserts the Initial record of a terminal transition.
func (m *MemStorage) addOutbox(t *memTrial, key OutboxKey, outcome TrialState, cause OutboxCause, grace time.Duration, intent FinalizationIntent) {
	st := t.study
	st.outbox = append(st.outbox, key)
	m.outbox[key] = &OutboxRecord{
		Key:         key,
		Study:       st.id,
		TerminalSeq: uint64(len(st.outbox)),
		Outcome:     outcome,
		Cause:       cause,
		Grace:       grace,
		Intent:      FinalizationIntent{Kind: intent.Kind, Data: compactJSON(intent.Data)},
		Phase:       PhaseInitial,
	}
}

// FencedMutate implements [Storage].
func (m *MemStorage) FencedMutate(ctx context.Context, req FencedMutationRequest) error {
	return m.mutate(ctx, "fenced_mutate", nil, req)
}

// MutateOwned implements [Storage].
func (m *MemStorage) MutateOwned(ctx context.Context, owner FinalizationToken, req FencedMutationRequest) error {
	return m.mutate(ctx, "mutate_owned", &owner, req)
}

func (m *MemStorage) mutate(ctx context.Context, op string, owner *FinalizationToken, req FencedMutationRequest) error {
	if err := begin(ctx, op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.ownedTrial(op, req.Owner)
	if err != nil {
		return err
	}
	if owner != nil {
		if err := checkFinalizer(op, t.study, *owner); err != nil {
			return err
		}
	}
	var w stagedWrites
	if err := stageParams(op, &w, t, req.Params); err != nil {
		return err
	}
	for _, iv := range req.Intermediate {
		if old, ok := t.inter[iv.Step]; ok {
			if old != iv.Value {
				return NewError(KindConflict, op, "step %d already reported a different value", iv.Step)
			}
			continue
		}
		w.add(func() { t.inter[iv.Step] = iv.Value })
	}
	for k, v := range req.Attrs {
		v := compactJSON(v)
		w.add(func() { t.attrs[k] = v })
	}
	if err := stageBlobs(op, &w, t.study, t, req.States, owner, true); err != nil {
		return err
	}
	w.apply()
	if req.Pause {
		t.lease.State = TrialPaused
		t.lease.Owner = ""
	}
	return nil
}

// Terminal implements [Storage].
func (m *MemStorage) Terminal(ctx context.Context, req TerminalRequest) error {
	_, err := m.terminal(ctx, "terminal", nil, req, nil)
	return err
}

// TerminalWithIntent implements [Storage].
func (m *MemStorage) TerminalWithIntent(ctx context.Context, req TerminalRequest, intent FinalizationIntent) (OutboxKey, error) {
	return m.terminal(ctx, "terminal_with_intent", nil, req, &intent)
}

// TerminalWithIntentOwned implements [Storage].
func (m *MemStorage) TerminalWithIntentOwned(ctx context.Context, owner FinalizationToken, req TerminalRequest, intent FinalizationIntent) (OutboxKey, error) {
	return m.terminal(ctx, "terminal_with_intent_owned", &owner, req, &intent)
}

func (m *MemStorage) terminal(ctx context.Context, op string, owner *FinalizationToken, req TerminalRequest, intent *FinalizationIntent) (OutboxKey, error) {
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
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.ownedTrial(op, req.Owner)
	if err != nil {
		return OutboxKey{}, err
	}
	st := t.study
	if owner != nil {
		if err := checkFinalizer(op, st, *owner); err != nil {
			return OutboxKey{}, err
		}
	}
	if err := st.spec.CheckValues(req.State, req.Values); err != nil {
		return OutboxKey{}, withOp(op, err)
	}
	key := OutboxKey{Trial: t.id, Epoch: t.lease.Epoch}
	if _, ok := m.outbox[key]; ok && intent != nil {
		return OutboxKey{}, NewError(KindStorage, op, "outbox record %v exists for a running epoch", key)
	}
	var w stagedWrites
	if err := stageBlobs(op, &w, st, t, req.States, owner, true); err != nil {
		return OutboxKey{}, err
	}
	w.apply()
	t.lease.State = req.State
	t.lease.Owner = ""
	t.values = slices.Clone(req.Values)
	if intent == nil {
		return OutboxKey{}, nil
	}
	m.addOutbox(t, key, req.State, CauseTerminal, 0, *intent)
	return key, nil
}

// ObserveFinalization implements [Storage]. It creates nothing.
func (m *MemStorage) ObserveFinalization(ctx context.Context, study StudyID) (FinalizationObservation, error) {
	const op = "observe_finalization"
	if err := begin(ctx, op); err != nil {
		return FinalizationObservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, study)
	if err != nil {
		return FinalizationObservation{}, err
	}
	return st.fin, nil
}

// AcquireFinalization implements [Storage]. The comparison is the whole of
// the decision: a held claim is never judged expired.
func (m *MemStorage) AcquireFinalization(ctx context.Context, req FinalizationAcquireRequest) (FinalizationToken, error) {
	const op = "acquire_finalization"
	if err := begin(ctx, op); err != nil {
		return FinalizationToken{}, err
	}
	if err := req.Validate(); err != nil {
		return FinalizationToken{}, withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, req.Study)
	if err != nil {
		return FinalizationToken{}, err
	}
	if st.fin != req.Observed {
		return FinalizationToken{}, NewError(KindConflict, op, "study %q finalization claim changed since it was observed (now fence %d, heartbeat %d, held=%t)",
			st.id, st.fin.Fence, st.fin.HeartbeatSeq, st.fin.Held)
	}
	st.fin.Fence++
	st.fin.Held = true
	st.fin.Holder = req.Holder
	return FinalizationToken{Study: st.id, Holder: req.Holder, Fence: st.fin.Fence}, nil
}

// RenewFinalization implements [Storage].
func (m *MemStorage) RenewFinalization(ctx context.Context, token FinalizationToken) (FinalizationObservation, error) {
	const op = "renew_finalization"
	if err := begin(ctx, op); err != nil {
		return FinalizationObservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, token.Study)
	if err != nil {
		return FinalizationObservation{}, err
	}
	if err := checkFinalizer(op, st, token); err != nil {
		return FinalizationObservation{}, err
	}
	st.fin.HeartbeatSeq++
	return st.fin, nil
}

// ReleaseFinalization implements [Storage]. The fence stays.
func (m *MemStorage) ReleaseFinalization(ctx context.Context, token FinalizationToken) error {
	const op = "release_finalization"
	if err := begin(ctx, op); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, token.Study)
	if err != nil {
		return err
	}
	if err := checkFinalizer(op, st, token); err != nil {
		return err
	}
	st.fin.Held = false
	st.fin.Holder = ""
	return nil
}

// AdvanceOutbox implements [Storage].
func (m *MemStorage) AdvanceOutbox(ctx context.Context, req OutboxAdvanceRequest) (OutboxPhase, error) {
	return m.advance(ctx, "advance_outbox", nil, req)
}

// AdvanceOutboxOwned implements [Storage].
func (m *MemStorage) AdvanceOutboxOwned(ctx context.Context, owner FinalizationToken, req OutboxAdvanceRequest) (OutboxPhase, error) {
	return m.advance(ctx, "advance_outbox_owned", &owner, req)
}

func (m *MemStorage) advance(ctx context.Context, op string, owner *FinalizationToken, req OutboxAdvanceRequest) (OutboxPhase, error) {
	if err := begin(ctx, op); err != nil {
		return "", err
	}
	if err := req.Validate(); err != nil {
		return "", withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.outbox[req.Key]
	if rec == nil {
		return "", NewError(KindNotFound, op, "outbox record %v", req.Key)
	}
	t := m.trials[req.Key.Trial]
	st := t.study
	// Advancing is finalization work whether or not it carries state: a
	// non-owner moving the cursor under an active owner would turn the
	// owner's next write into a silently ignored replay.
	if err := checkStudyWriter(op, st, owner); err != nil {
		return "", err
	}
	cur, next := rec.Phase, req.Phase
	if next.Rank() <= cur.Rank() {
		if next == PhaseEffects {
			if err := checkEffectReplay(op, rec, req.Effects); err != nil {
				return "", err
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
	if err := stageBlobs(op, &w, st, t, req.States, owner, false); err != nil {
		return "", err
	}
	w.apply()
	if next == PhaseEffects {
		rec.Effects = make([]OutboxEffect, 0, len(req.Effects))
		for _, e := range req.Effects {
			rec.Effects = append(rec.Effects, normalizeEffect(e))
		}
		slices.SortFunc(rec.Effects, func(a, b OutboxEffect) int { return cmp.Compare(a.Name, b.Name) })
	}
	rec.Phase = next
	return next, nil
}

// checkEffectReplay accepts a replayed advance into PhaseEffects only if
// every effect it names was published with the same content.
func checkEffectReplay(op string, rec *OutboxRecord, effects []OutboxEffect) error {
	for _, e := range effects {
		i := slices.IndexFunc(rec.Effects, func(r OutboxEffect) bool { return r.Name == e.Name })
		if i < 0 || !sameEffect(rec.Effects[i], normalizeEffect(e)) {
			return NewError(KindConflict, op, "effect %q replayed with a different payload", e.Name)
		}
	}
	return nil
}

func sameEffect(a, b OutboxEffect) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// GetOutbox implements [Storage].
func (m *MemStorage) GetOutbox(ctx context.Context, key OutboxKey) (OutboxRecord, bool, error) {
	const op = "get_outbox"
	if err := begin(ctx, op); err != nil {
		return OutboxRecord{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.outbox[key]
	if rec == nil {
		return OutboxRecord{}, false, nil
	}
	return cloneRecord(*rec), true, nil
}

// ListOutbox implements [Storage].
func (m *MemStorage) ListOutbox(ctx context.Context) ([]OutboxRecord, error) {
	const op = "list_outbox"
	if err := begin(ctx, op); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]OutboxRecord, 0, len(m.outbox))
	for _, rec := range m.outbox {
		out = append(out, cloneRecord(*rec))
	}
	slices.SortFunc(out, func(a, b OutboxRecord) int { return a.Key.Compare(b.Key) })
	return out, nil
}

// ListOutboxPage implements [Storage]. It reads only the records it
// returns plus one, never the study's whole history.
func (m *MemStorage) ListOutboxPage(ctx context.Context, req OutboxPageRequest) (OutboxPage, error) {
	const op = "list_outbox_page"
	if err := begin(ctx, op); err != nil {
		return OutboxPage{}, err
	}
	if err := req.Validate(); err != nil {
		return OutboxPage{}, withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, req.Study)
	if err != nil {
		return OutboxPage{}, err
	}
	return outboxPage(op, st, func(k OutboxKey) *OutboxRecord { return m.outbox[k] }, req)
}

// outboxPage reads one page of st's outbox records, in terminal-sequence
// order, touching only the records it returns: get finds a record by key.
func outboxPage(op string, st *memStudy, get func(OutboxKey) *OutboxRecord, req OutboxPageRequest) (OutboxPage, error) {
	horizon, start := uint64(len(st.outbox)), uint64(0)
	if c := req.Cursor; c != nil {
		switch {
		case c.Study != req.Study:
			return OutboxPage{}, NewError(KindConflict, op, "cursor belongs to study %q", c.Study)
		case c.Horizon > uint64(len(st.outbox)):
			return OutboxPage{}, NewError(KindConflict, op, "cursor horizon %d is beyond the study's %d records", c.Horizon, len(st.outbox))
		case c.AfterSeq == 0 || c.AfterSeq > c.Horizon:
			return OutboxPage{}, NewError(KindConflict, op, "cursor position %d is outside 1..%d", c.AfterSeq, c.Horizon)
		case st.outbox[c.AfterSeq-1] != c.AfterKey:
			return OutboxPage{}, NewError(KindConflict, op, "cursor names %v at position %d, which holds %v", c.AfterKey, c.AfterSeq, st.outbox[c.AfterSeq-1])
		}
		horizon, start = c.Horizon, c.AfterSeq
	}
	page := OutboxPage{Records: []OutboxRecord{}}
	var used uint64
	i := start
	for ; i < horizon; i++ {
		if uint64(len(page.Records)) == req.MaxRecords {
			break
		}
		rec := get(st.outbox[i])
		size, err := RecordSize(*rec)
		if err != nil {
			return OutboxPage{}, StorageError(op, err)
		}
		if used+uint64(size) > req.MaxBytes {
			if len(page.Records) == 0 {
				return OutboxPage{}, NewError(KindResourceLimit, op, "record %v is %d bytes, over max_bytes %d", rec.Key, size, req.MaxBytes)
			}
			break
		}
		used += uint64(size)
		page.Records = append(page.Records, cloneRecord(*rec))
	}
	if i < horizon {
		page.Next = &OutboxCursor{Study: st.id, Horizon: horizon, AfterSeq: i, AfterKey: st.outbox[i-1]}
	}
	return page, nil
}

// CompleteOutboxEffect implements [Storage].
func (m *MemStorage) CompleteOutboxEffect(ctx context.Context, req OutboxEffectCompletion) error {
	const op = "complete_outbox_effect"
	if err := begin(ctx, op); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, e, err := m.effect(op, req.Effect)
	if err != nil {
		return err
	}
	if e.Kind != EffectExternal {
		return NewError(KindConflict, op, "effect %q is a %s effect, completed by the store, not acknowledged", e.Name, e.Kind)
	}
	if completion(rec, e.Name) == nil {
		addCompletion(rec, EffectCompletion{Name: e.Name})
	}
	return nil
}

func (m *MemStorage) effect(op string, key OutboxEffectKey) (*OutboxRecord, OutboxEffect, error) {
	rec := m.outbox[key.Outbox]
	if rec == nil {
		return nil, OutboxEffect{}, NewError(KindNotFound, op, "outbox record %v", key.Outbox)
	}
	i := slices.IndexFunc(rec.Effects, func(e OutboxEffect) bool { return e.Name == key.Name })
	if i < 0 {
		return nil, OutboxEffect{}, NewError(KindNotFound, op, "effect %q of %v", key.Name, key.Outbox)
	}
	return rec, rec.Effects[i], nil
}

func completion(rec *OutboxRecord, name string) *EffectCompletion {
	i := slices.IndexFunc(rec.Completed, func(c EffectCompletion) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	return &rec.Completed[i]
}

func addCompletion(rec *OutboxRecord, c EffectCompletion) {
	rec.Completed = append(rec.Completed, c)
	slices.SortFunc(rec.Completed, func(a, b EffectCompletion) int { return cmp.Compare(a.Name, b.Name) })
}

// CreateReplacement implements [Storage].
func (m *MemStorage) CreateReplacement(ctx context.Context, effect OutboxEffectKey) (ReplacementOutcome, error) {
	const op = "create_replacement"
	if err := begin(ctx, op); err != nil {
		return ReplacementOutcome{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, e, err := m.effect(op, effect)
	if err != nil {
		return ReplacementOutcome{}, err
	}
	if e.Kind != EffectReplacement {
		return ReplacementOutcome{}, NewError(KindConflict, op, "effect %q is a %s effect, not a replacement", e.Name, e.Kind)
	}
	if c := completion(rec, e.Name); c != nil {
		return *c.Replacement, nil
	}
	st := m.studies[rec.Study]
	spec := e.Replacement
	if st.trials >= spec.MaxTrials {
		out := ReplacementOutcome{Status: ReplacementExhausted}
		addCompletion(rec, EffectCompletion{Name: e.Name, Replacement: &out})
		return out, nil
	}
	// The new trial has no state yet, so the kind/version comparison in
	// stageBlobs cannot fail here; it runs anyway so that the rule has one
	// implementation.
	t := newTrial(st, true)
	var w stagedWrites
	if err := stageParams(op, &w, t, spec.Params); err != nil {
		return ReplacementOutcome{}, err
	}
	if err := stageBlobs(op, &w, st, t, spec.States, nil, false); err != nil {
		return ReplacementOutcome{}, err
	}
	m.register(t)
	w.apply()
	t.replacementOf = &effect
	out := ReplacementOutcome{Status: ReplacementCreated, Trial: t.id, Number: t.number}
	addCompletion(rec, EffectCompletion{Name: e.Name, Replacement: &out})
	return out, nil
}

// PutFinalizedState implements [Storage].
func (m *MemStorage) PutFinalizedState(ctx context.Context, req FinalizedStateRequest) error {
	const op = "put_finalized_state"
	if err := begin(ctx, op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return withOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, req.Trial)
	if err != nil {
		return err
	}
	if !t.lease.State.Terminal() {
		return NewError(KindConflict, op, "trial %q is %s, not terminal", t.id, t.lease.State)
	}
	var w stagedWrites
	if err := stageBlobs(op, &w, t.study, t, []StateBlob{req.State}, nil, false); err != nil {
		return err
	}
	w.apply()
	return nil
}

// InspectStudy implements [Inspector].
func (m *MemStorage) InspectStudy(ctx context.Context, study StudyID) (Study, error) {
	const op = "inspect_study"
	if err := begin(ctx, op); err != nil {
		return Study{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, study)
	if err != nil {
		return Study{}, err
	}
	return st.snapshot(), nil
}

func (st *memStudy) snapshot() Study {
	return Study{
		ID:           st.id,
		Spec:         st.spec,
		Trials:       st.trials,
		TerminalSeq:  uint64(len(st.outbox)),
		Finalization: st.fin,
		States:       sortedBlobs(st.states),
	}
}

// InspectTrial implements [Inspector].
func (m *MemStorage) InspectTrial(ctx context.Context, trial TrialID) (Trial, error) {
	const op = "inspect_trial"
	if err := begin(ctx, op); err != nil {
		return Trial{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.trials[trial]
	if t == nil {
		return Trial{}, NewError(KindNotFound, op, "trial %q", trial)
	}
	return t.snapshot(), nil
}

func (t *memTrial) snapshot() Trial {
	out := Trial{
		ID:      t.id,
		Study:   t.study.id,
		Number:  t.number,
		Managed: t.managed,
		Lease:   t.lease,
		Values:  slices.Clone(t.values),
		States:  sortedBlobs(t.states),
	}
	for _, name := range slices.Sorted(maps.Keys(t.params)) {
		out.Params = append(out.Params, cloneParam(t.params[name]))
	}
	for _, step := range slices.Sorted(maps.Keys(t.inter)) {
		out.Intermediate = append(out.Intermediate, IntermediateValue{Step: step, Value: t.inter[step]})
	}
	if len(t.attrs) > 0 {
		out.Attrs = make(map[string]json.RawMessage, len(t.attrs))
		for k, v := range t.attrs {
			out.Attrs[k] = slices.Clone(v)
		}
	}
	if t.replacementOf != nil {
		r := *t.replacementOf
		out.ReplacementOf = &r
	}
	return out
}

func sortedBlobs(m map[string]StateBlob) []StateBlob {
	var out []StateBlob
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, cloneBlob(m[name]))
	}
	return out
}

func cloneBlob(b StateBlob) StateBlob {
	if len(b.Data) == 0 {
		b.Data = nil // nil and empty are one value; keep one encoding of it
	} else {
		b.Data = slices.Clone(b.Data)
	}
	return b
}

func cloneParam(p Param) Param {
	p.Distribution = slices.Clone(p.Distribution)
	return p
}

func normalizeEffect(e OutboxEffect) OutboxEffect {
	e.Payload = compactJSON(e.Payload)
	if e.Replacement != nil {
		s := ReplacementSpec{MaxTrials: e.Replacement.MaxTrials}
		for _, p := range e.Replacement.Params {
			p.Distribution = compactJSON(p.Distribution)
			s.Params = append(s.Params, p)
		}
		for _, b := range e.Replacement.States {
			s.States = append(s.States, cloneBlob(b))
		}
		e.Replacement = &s
	}
	return e
}

func cloneRecord(r OutboxRecord) OutboxRecord {
	r.Intent.Data = slices.Clone(r.Intent.Data)
	if r.Effects != nil {
		effects := make([]OutboxEffect, len(r.Effects))
		for i, e := range r.Effects {
			effects[i] = normalizeEffect(e)
		}
		r.Effects = effects
	}
	if r.Completed != nil {
		done := make([]EffectCompletion, len(r.Completed))
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
