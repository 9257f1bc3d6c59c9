// Package memstore is the in-memory reference implementation of the trial
// lifecycle contract (package lifecycle): the executable reading of
// spec/lifecycle.md, against which the conformance suite
// (lifecycle/lifecycletest) and the journal-backed implementation
// (lifecycle/journalstore) are held.
package memstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
)

// Storage is the in-memory reference implementation of [lifecycle.Storage]
// and [lifecycle.Inspector]. One mutex is its transaction: every method validates
// everything, then writes, under the lock, so an error leaves no trace. It
// holds every study in memory for the life of the value and is safe for
// concurrent use. Create one with New; the zero value is not
// usable.
//
// Storage is the executable reading of spec/lifecycle.md. Where a
// journal-backed store and this one disagree, the conformance suite
// (package lifecycletest) decides.
type Storage struct {
	mu      sync.Mutex
	studies map[lifecycle.StudyID]*model.Study
	trials  map[lifecycle.TrialID]*model.Trial
	outbox  map[lifecycle.OutboxKey]*lifecycle.OutboxRecord
}

var _ interface {
	lifecycle.Storage
	lifecycle.Inspector
} = (*Storage)(nil)

// New returns an empty store.
func New() *Storage {
	return &Storage{
		studies: map[lifecycle.StudyID]*model.Study{},
		trials:  map[lifecycle.TrialID]*model.Trial{},
		outbox:  map[lifecycle.OutboxKey]*lifecycle.OutboxRecord{},
	}
}

// CreateStudy creates a study. It stands in for the surrounding study
// storage, which owns study creation; the lifecycle contract has none.
func (m *Storage) CreateStudy(ctx context.Context, spec lifecycle.StudySpec) (lifecycle.StudyID, error) {
	const op = "create_study"
	if err := model.Begin(ctx, op); err != nil {
		return "", err
	}
	if err := spec.Validate(); err != nil {
		return "", model.WithOp(op, err)
	}
	id := lifecycle.StudyID(ulid.Make().String())
	m.mu.Lock()
	defer m.mu.Unlock()
	m.studies[id] = &model.Study{
		ID:     id,
		Spec:   spec,
		Keys:   map[string]lifecycle.ReservationOutcome{},
		States: map[string]lifecycle.StateBlob{},
		Fin:    lifecycle.FinalizationObservation{Study: id},
	}
	return id, nil
}

// CreateUnmanagedTrial creates a trial in the given state outside the
// lifecycle protocol, as plain study CRUD (an imported or legacy trial)
// would. It consumes a trial number. Every lifecycle operation addressed
// to it answers KindUnsupported.
func (m *Storage) CreateUnmanagedTrial(ctx context.Context, study lifecycle.StudyID, state lifecycle.TrialState) (lifecycle.TrialID, error) {
	const op = "create_unmanaged_trial"
	if err := model.Begin(ctx, op); err != nil {
		return "", err
	}
	if !state.Valid() {
		return "", lifecycle.NewError(lifecycle.KindInvalid, op, "unknown state %q", state)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, study)
	if err != nil {
		return "", err
	}
	t := model.NewTrial(st, false)
	t.Lease.State = state
	m.register(t)
	return t.ID, nil
}

func (m *Storage) study(op string, id lifecycle.StudyID) (*model.Study, error) {
	st := m.studies[id]
	if st == nil {
		return nil, lifecycle.NewError(lifecycle.KindNotFound, op, "study %q", id)
	}
	return st, nil
}

// managedTrial finds a trial the lifecycle protocol governs.
func (m *Storage) managedTrial(op string, id lifecycle.TrialID) (*model.Trial, error) {
	t := m.trials[id]
	if t == nil {
		return nil, lifecycle.NewError(lifecycle.KindNotFound, op, "trial %q", id)
	}
	if !t.Managed {
		return nil, lifecycle.NewError(lifecycle.KindUnsupported, op, "trial %q is not lifecycle-managed", id)
	}
	return t, nil
}

// ownedTrial finds a trial and checks that tok is exactly its current owner.
func (m *Storage) ownedTrial(op string, tok lifecycle.TrialOwnerToken) (*model.Trial, error) {
	t, err := m.managedTrial(op, tok.Trial)
	if err != nil {
		return nil, err
	}
	l := t.Lease
	if l.State != lifecycle.TrialRunning || l.Owner != tok.Owner || l.Epoch != tok.Epoch {
		return nil, lifecycle.NewError(lifecycle.KindLeaseLost, op, "trial %q is %s under owner %q epoch %d; token is owner %q epoch %d",
			t.ID, l.State, l.Owner, l.Epoch, tok.Owner, tok.Epoch)
	}
	return t, nil
}

func (m *Storage) register(t *model.Trial) {
	t.Study.Trials++
	m.trials[t.ID] = t
}

// ReserveAndCreateIfBudget implements [lifecycle.Storage].
func (m *Storage) ReserveAndCreateIfBudget(ctx context.Context, req lifecycle.ReserveAndCreateRequest) (lifecycle.ReservationOutcome, error) {
	const op = "reserve_and_create_if_budget"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.ReservationOutcome{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.ReservationOutcome{}, model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, req.Study)
	if err != nil {
		return lifecycle.ReservationOutcome{}, err
	}
	if req.Key != "" {
		if out, ok := st.Keys[req.Key]; ok {
			return out, nil
		}
	}
	if st.Trials >= req.MaxTrials {
		return lifecycle.ReservationOutcome{Status: lifecycle.ReservationExhausted}, nil
	}
	t := model.NewTrial(st, true)
	m.register(t)
	out := lifecycle.ReservationOutcome{Status: lifecycle.ReservationCreated, Trial: t.ID, Number: t.Number}
	if req.Key != "" {
		st.Keys[req.Key] = out
	}
	return out, nil
}

// Abandon implements [lifecycle.Storage].
func (m *Storage) Abandon(ctx context.Context, req lifecycle.AbandonRequest) (bool, error) {
	const op = "abandon"
	if err := model.Begin(ctx, op); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, req.Trial)
	if err != nil {
		return false, err
	}
	if t.Lease.State != lifecycle.TrialWaiting {
		return false, nil
	}
	t.Lease.State = lifecycle.TrialFailed
	return true, nil
}

// Observe implements [lifecycle.Storage].
func (m *Storage) Observe(ctx context.Context, trial lifecycle.TrialID) (lifecycle.LeaseObservation, error) {
	const op = "observe"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, trial)
	if err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	return t.Lease, nil
}

// Claim implements [lifecycle.Storage].
func (m *Storage) Claim(ctx context.Context, req lifecycle.ClaimRequest) (lifecycle.TrialOwnerToken, error) {
	const op = "claim"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.TrialOwnerToken{}, model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, req.Trial)
	if err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	if s := t.Lease.State; s != lifecycle.TrialWaiting && s != lifecycle.TrialPaused {
		return lifecycle.TrialOwnerToken{}, lifecycle.NewError(lifecycle.KindLeaseLost, op, "trial %q is %s, not claimable", t.ID, s)
	}
	var w model.StagedWrites
	if err := model.StageParams(op, &w, t, req.Params); err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	if err := model.StageBlobs(op, &w, t.Study, t, req.States, nil, true); err != nil {
		return lifecycle.TrialOwnerToken{}, err
	}
	w.Apply()
	t.Lease = lifecycle.LeaseObservation{
		Trial:       t.ID,
		State:       lifecycle.TrialRunning,
		Owner:       req.Owner,
		Epoch:       t.Lease.Epoch + 1,
		HeartbeatAt: req.HeartbeatAt.Round(0),
	}
	return lifecycle.TrialOwnerToken{Trial: t.ID, Owner: req.Owner, Epoch: t.Lease.Epoch}, nil
}

// Renew implements [lifecycle.Storage].
func (m *Storage) Renew(ctx context.Context, req lifecycle.RenewRequest) (lifecycle.LeaseObservation, error) {
	const op = "renew"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.LeaseObservation{}, model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.ownedTrial(op, req.Owner)
	if err != nil {
		return lifecycle.LeaseObservation{}, err
	}
	t.Lease.HeartbeatSeq++
	t.Lease.HeartbeatAt = req.HeartbeatAt.Round(0)
	return t.Lease, nil
}

// FailStale implements [lifecycle.Storage]. It reads no clock: the comparison is
// between the caller's observation and the current lease, nothing else.
func (m *Storage) FailStale(ctx context.Context, req lifecycle.FailStaleRequest) (bool, error) {
	const op = "fail_stale"
	if err := model.Begin(ctx, op); err != nil {
		return false, err
	}
	if err := req.Validate(); err != nil {
		return false, model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.managedTrial(op, req.Observed.Trial)
	if err != nil {
		return false, err
	}
	if t.Lease.State != lifecycle.TrialRunning || !t.Lease.Equal(req.Observed) {
		return false, nil
	}
	key := lifecycle.OutboxKey{Trial: t.ID, Epoch: t.Lease.Epoch}
	if _, ok := m.outbox[key]; ok {
		// A running epoch cannot have ended already; refuse rather than
		// overwrite evidence.
		return false, lifecycle.NewError(lifecycle.KindStorage, op, "outbox record %v exists for a running epoch", key)
	}
	t.Lease.State = lifecycle.TrialFailed
	t.Lease.Owner = ""
	m.addOutbox(t, key, lifecycle.TrialFailed, lifecycle.CauseStale, req.Grace, req.Intent)
	return true, nil
}

// addOutbox inserts the Initial record of a terminal transition.
func (m *Storage) addOutbox(t *model.Trial, key lifecycle.OutboxKey, outcome lifecycle.TrialState, cause lifecycle.OutboxCause, grace time.Duration, intent lifecycle.FinalizationIntent) {
	st := t.Study
	st.Outbox = append(st.Outbox, key)
	m.outbox[key] = &lifecycle.OutboxRecord{
		Key:         key,
		Study:       st.ID,
		TerminalSeq: uint64(len(st.Outbox)),
		Outcome:     outcome,
		Cause:       cause,
		Grace:       grace,
		Intent:      lifecycle.FinalizationIntent{Kind: intent.Kind, Data: model.CompactJSON(intent.Data)},
		Phase:       lifecycle.PhaseInitial,
	}
}

// FencedMutate implements [lifecycle.Storage].
func (m *Storage) FencedMutate(ctx context.Context, req lifecycle.FencedMutationRequest) error {
	return m.mutate(ctx, "fenced_mutate", nil, req)
}

// MutateOwned implements [lifecycle.Storage].
func (m *Storage) MutateOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.FencedMutationRequest) error {
	return m.mutate(ctx, "mutate_owned", &owner, req)
}

func (m *Storage) mutate(ctx context.Context, op string, owner *lifecycle.FinalizationToken, req lifecycle.FencedMutationRequest) error {
	if err := model.Begin(ctx, op); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return model.WithOp(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.ownedTrial(op, req.Owner)
	if err != nil {
		return err
	}
	if owner != nil {
		if err := model.CheckFinalizer(op, t.Study, *owner); err != nil {
			return err
		}
	}
	var w model.StagedWrites
	if err := model.StageParams(op, &w, t, req.Params); err != nil {
		return err
	}
	for _, iv := range req.Intermediate {
		if old, ok := t.Inter[iv.Step]; ok {
			if old != iv.Value {
				return lifecycle.NewError(lifecycle.KindConflict, op, "step %d already reported a different value", iv.Step)
			}
			continue
		}
		w.Add(func() { t.Inter[iv.Step] = iv.Value })
	}
	for k, v := range req.Attrs {
		v := model.CompactJSON(v)
		w.Add(func() { t.Attrs[k] = v })
	}
	if err := model.StageBlobs(op, &w, t.Study, t, req.States, owner, true); err != nil {
		return err
	}
	w.Apply()
	if req.Pause {
		t.Lease.State = lifecycle.TrialPaused
		t.Lease.Owner = ""
	}
	return nil
}

// Terminal implements [lifecycle.Storage].
func (m *Storage) Terminal(ctx context.Context, req lifecycle.TerminalRequest) error {
	_, err := m.terminal(ctx, "terminal", nil, req, nil)
	return err
}

// TerminalWithIntent implements [lifecycle.Storage].
func (m *Storage) TerminalWithIntent(ctx context.Context, req lifecycle.TerminalRequest, intent lifecycle.FinalizationIntent) (lifecycle.OutboxKey, error) {
	return m.terminal(ctx, "terminal_with_intent", nil, req, &intent)
}

// TerminalWithIntentOwned implements [lifecycle.Storage].
func (m *Storage) TerminalWithIntentOwned(ctx context.Context, owner lifecycle.FinalizationToken, req lifecycle.TerminalRequest, intent lifecycle.FinalizationIntent) (lifecycle.OutboxKey, error) {
	return m.terminal(ctx, "terminal_with_intent_owned", &owner, req, &intent)
}

func (m *Storage) terminal(ctx context.Context, op string, owner *lifecycle.FinalizationToken, req lifecycle.TerminalRequest, intent *lifecycle.FinalizationIntent) (lifecycle.OutboxKey, error) {
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.OutboxKey{}, err
	}
	if err := req.Validate(); err != nil {
		return lifecycle.OutboxKey{}, model.WithOp(op, err)
	}
	if intent != nil {
		if err := intent.Validate(); err != nil {
			return lifecycle.OutboxKey{}, model.WithOp(op, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.ownedTrial(op, req.Owner)
	if err != nil {
		return lifecycle.OutboxKey{}, err
	}
	st := t.Study
	if owner != nil {
		if err := model.CheckFinalizer(op, st, *owner); err != nil {
			return lifecycle.OutboxKey{}, err
		}
	}
	if err := st.Spec.CheckValues(req.State, req.Values); err != nil {
		return lifecycle.OutboxKey{}, model.WithOp(op, err)
	}
	key := lifecycle.OutboxKey{Trial: t.ID, Epoch: t.Lease.Epoch}
	if _, ok := m.outbox[key]; ok && intent != nil {
		return lifecycle.OutboxKey{}, lifecycle.NewError(lifecycle.KindStorage, op, "outbox record %v exists for a running epoch", key)
	}
	var w model.StagedWrites
	if err := model.StageBlobs(op, &w, st, t, req.States, owner, true); err != nil {
		return lifecycle.OutboxKey{}, err
	}
	w.Apply()
	t.Lease.State = req.State
	t.Lease.Owner = ""
	t.Values = slices.Clone(req.Values)
	if intent == nil {
		return lifecycle.OutboxKey{}, nil
	}
	m.addOutbox(t, key, req.State, lifecycle.CauseTerminal, 0, *intent)
	return key, nil
}

// InspectStudy implements [lifecycle.Inspector].
func (m *Storage) InspectStudy(ctx context.Context, study lifecycle.StudyID) (lifecycle.Study, error) {
	const op = "inspect_study"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.Study{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.study(op, study)
	if err != nil {
		return lifecycle.Study{}, err
	}
	return st.Snapshot(), nil
}

// InspectTrial implements [lifecycle.Inspector].
func (m *Storage) InspectTrial(ctx context.Context, trial lifecycle.TrialID) (lifecycle.Trial, error) {
	const op = "inspect_trial"
	if err := model.Begin(ctx, op); err != nil {
		return lifecycle.Trial{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.trials[trial]
	if t == nil {
		return lifecycle.Trial{}, lifecycle.NewError(lifecycle.KindNotFound, op, "trial %q", trial)
	}
	return t.Snapshot(), nil
}
