package lifecycle

import (
	"cmp"
	"encoding/json"
	"time"
)

// StudyID identifies a study. A journal-backed store uses the study's case
// id; the in-memory store uses a ULID.
type StudyID string

// TrialID identifies a trial. A journal-backed store uses the trial's run
// id; the in-memory store uses a ULID.
type TrialID string

// OperationID correlates a lifecycle call with the caller's operation for
// diagnostics. It is context, never identity: no outcome depends on it and
// replay safety comes from the durable keys. See [WithOperation].
type OperationID string

// NoOperation is the honest operation id for a call with no live caller
// operation, usually recovery.
const NoOperation OperationID = ""

// TrialState is where a trial stands in its lifecycle. See spec/lifecycle.md
// for the transition table.
type TrialState string

// The trial states.
const (
	// TrialWaiting: reserved and created, never claimed. Claimable; abandonable.
	TrialWaiting TrialState = "waiting"
	// TrialRunning: owned by exactly one owner epoch.
	TrialRunning TrialState = "running"
	// TrialPaused: its owner ended its epoch without a terminal outcome.
	// Claimable again, under a new epoch.
	TrialPaused TrialState = "paused"
	// TrialComplete: terminal; the objective values are recorded.
	TrialComplete TrialState = "complete"
	// TrialPruned: terminal; stopped early by the owner's pruning decision.
	TrialPruned TrialState = "pruned"
	// TrialFailed: terminal; told failed, failed as stale, or abandoned.
	TrialFailed TrialState = "failed"
)

// Terminal reports whether s is one of the terminal states, from which no
// transition leaves.
func (s TrialState) Terminal() bool {
	return s == TrialComplete || s == TrialPruned || s == TrialFailed
}

// Valid reports whether s is one of the defined states.
func (s TrialState) Valid() bool {
	switch s {
	case TrialWaiting, TrialRunning, TrialPaused, TrialComplete, TrialPruned, TrialFailed:
		return true
	}
	return false
}

// StudySpec is what a study declares at creation and every transition
// validates against. It is not part of the lifecycle contract (studies are
// created by the surrounding study storage) but every backend needs it.
type StudySpec struct {
	// Objectives is how many values a complete trial reports (1 for
	// single-objective studies). 1 to MaxObjectives.
	Objectives int `json:"objectives"`
	// Constraints is the arity of the canonical constraint state
	// (ConstraintsStateName); 0 means the study has no constraints and
	// refuses constraint state. 0 to MaxConstraints.
	Constraints int `json:"constraints"`
}

// ReserveAndCreateRequest asks to create one waiting trial if the study's
// durable-record budget allows it.
type ReserveAndCreateRequest struct {
	Study StudyID `json:"study"`
	// MaxTrials is the budget: the number of trial records (every trial
	// number ever consumed in the study, in any state, replacements
	// included) the caller allows. A trial is created only while the study
	// holds fewer. Zero is refused as invalid rather than read as "no
	// budget left", so that a forgotten field cannot end a study.
	MaxTrials uint64 `json:"max_trials"`
	// Key, when not empty, makes the reservation idempotent within the
	// study: a repeat with the same key returns the first Created outcome
	// and creates nothing. Exhausted outcomes are not remembered.
	Key string `json:"key,omitempty"`
}

// ReservationStatus says whether a reservation created a trial.
type ReservationStatus string

// The reservation statuses.
const (
	ReservationCreated   ReservationStatus = "created"
	ReservationExhausted ReservationStatus = "exhausted"
)

// ReservationOutcome is the answer to ReserveAndCreateIfBudget. Created
// consumed exactly one trial number; Exhausted consumed nothing.
type ReservationOutcome struct {
	Status ReservationStatus `json:"status"`
	// Trial and Number identify the created trial; zero when Exhausted.
	Trial  TrialID `json:"trial,omitempty"`
	Number uint64  `json:"number"`
}

// AbandonRequest asks to fail a reservation that was never claimed.
type AbandonRequest struct {
	Trial TrialID `json:"trial"`
}

// LeaseObservation is the complete lease state of a trial at one instant.
// Stale failure compares all of it, field by field (see [LeaseObservation.Equal]).
type LeaseObservation struct {
	Trial TrialID    `json:"trial"`
	State TrialState `json:"state"`
	// Owner is the current owner; empty unless State is TrialRunning.
	Owner string `json:"owner,omitempty"`
	// Epoch is the owner epoch: 0 until the first claim, then bumped by
	// every claim and never decreased. A journal-backed store uses the
	// run's lease epoch.
	Epoch uint64 `json:"epoch"`
	// HeartbeatSeq counts renewals within the epoch. It is how an observer
	// sees liveness without reading anyone's clock.
	HeartbeatSeq uint64 `json:"heartbeat_seq"`
	// HeartbeatAt is the owner's own clock at its last claim or renewal,
	// kept for people. No backend may compare it with another clock.
	HeartbeatAt time.Time `json:"heartbeat_at,omitzero"`
}

// Equal reports whether o and p are the same observation in every field.
// Times compare as instants, so an observation that went through JSON
// still equals the original.
func (o LeaseObservation) Equal(p LeaseObservation) bool {
	return o.Trial == p.Trial && o.State == p.State && o.Owner == p.Owner &&
		o.Epoch == p.Epoch && o.HeartbeatSeq == p.HeartbeatSeq &&
		o.HeartbeatAt.Equal(p.HeartbeatAt)
}

// TrialOwnerToken is the proof of ownership of one trial for one epoch.
// Every fenced operation is refused unless trial, owner and epoch are all
// exactly current and the trial is running.
type TrialOwnerToken struct {
	Trial TrialID `json:"trial"`
	Owner string  `json:"owner"`
	Epoch uint64  `json:"epoch"`
}

// Param is one trial parameter in Optuna's shape: the internal (float)
// representation and the distribution that maps it to the external value.
// Once set, a parameter is immutable: setting it again with the same value
// and distribution is a no-op and anything else is a conflict.
type Param struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Distribution is the distribution's JSON, stored compacted; optional.
	Distribution json.RawMessage `json:"distribution,omitempty"`
}

// IntermediateValue is one reported intermediate objective value. A step is
// reported once: repeating it with the same value is a no-op and with a
// different value is a conflict.
type IntermediateValue struct {
	Step  uint64  `json:"step"`
	Value float64 `json:"value"`
}

// ScopeLevel says which state scope a blob belongs to.
type ScopeLevel string

// The scope levels.
const (
	// ScopeTrial: the state of the trial the operation addresses.
	ScopeTrial ScopeLevel = "trial"
	// ScopeStudy: the study-wide seam state (sampler and callback state
	// carried from one trial's finalization to the next). Once a study's
	// finalization protocol is active, only the current finalization owner
	// may replace it.
	ScopeStudy ScopeLevel = "study"
)

// StateBlob is one typed, versioned piece of state. Within its scope a blob
// is identified by Name; Kind and Version say how to read Data. A write that
// would replace a blob of a different Kind or Version is refused as
// Incompatible, and the whole operation is left untouched.
type StateBlob struct {
	Scope ScopeLevel `json:"scope"`
	Name  string     `json:"name"`
	Kind  string     `json:"kind"`
	// Version is the Kind's format version, from 1.
	Version uint32 `json:"version"`
	Data    []byte `json:"data"`
}

// Canonical constraint state. A trial-scope blob named ConstraintsStateName
// must have kind ConstraintsKind, version ConstraintsVersion and data a JSON
// array of exactly StudySpec.Constraints finite numbers. It is written only
// under the trial owner's fence (claim, fenced mutation, terminal).
const (
	ConstraintsStateName = "constraints"
	ConstraintsKind      = "runseal.constraints"
	ConstraintsVersion   = 1
)

// FencedMutationRequest applies one atomic mutation to a running trial if
// Owner is exactly current. All parts apply together or none does.
type FencedMutationRequest struct {
	Owner        TrialOwnerToken            `json:"owner"`
	Params       []Param                    `json:"params,omitempty"`
	Intermediate []IntermediateValue        `json:"intermediate,omitempty"`
	Attrs        map[string]json.RawMessage `json:"attrs,omitempty"`
	States       []StateBlob                `json:"states,omitempty"`
	// Pause, after applying the rest, ends the owner's epoch and leaves the
	// trial TrialPaused, claimable again under a new epoch.
	Pause bool `json:"pause,omitempty"`
}

// ClaimRequest claims a waiting or paused trial for Owner and writes its
// initial parameters and trial-scope state, starting a new owner epoch.
type ClaimRequest struct {
	Trial TrialID `json:"trial"`
	// Owner names the claiming worker; it should be unique per process so
	// that two processes never share an identity.
	Owner  string      `json:"owner"`
	Params []Param     `json:"params,omitempty"`
	States []StateBlob `json:"states,omitempty"`
	// HeartbeatAt is the owner's clock, recorded for people only.
	HeartbeatAt time.Time `json:"heartbeat_at,omitzero"`
}

// RenewRequest renews a running owner's lease.
type RenewRequest struct {
	Owner TrialOwnerToken `json:"owner"`
	// HeartbeatAt is the owner's clock, recorded for people only.
	HeartbeatAt time.Time `json:"heartbeat_at,omitzero"`
}

// FailStaleRequest asks to fail a running trial whose complete lease the
// caller observed, waited Grace on its own clock, and observed again
// unchanged. The store compares Observed with the current lease atomically
// and never consults a clock.
type FailStaleRequest struct {
	Observed LeaseObservation `json:"observed"`
	// Grace is the interval the caller proved the observation unchanged
	// over, on its own monotonic clock. It must be positive; the store
	// records it and cannot check it.
	Grace time.Duration `json:"grace"`
	// Intent is recorded in the Initial outbox record the winner commits.
	Intent FinalizationIntent `json:"intent"`
}

// TerminalRequest commits a terminal outcome under the owner's token.
type TerminalRequest struct {
	Owner TrialOwnerToken `json:"owner"`
	// State is TrialComplete, TrialPruned or TrialFailed.
	State TrialState `json:"state"`
	// Values are the objective values: exactly StudySpec.Objectives for
	// Complete, none or exactly that many for Pruned, none for Failed.
	Values []float64 `json:"values,omitempty"`
	// States are written with the outcome. Study-scope blobs are seam
	// state and need the finalization owner once the protocol is active.
	States []StateBlob `json:"states,omitempty"`
}

// FinalizationIntent is the caller's durable instruction to whoever
// finalizes a terminal trial. The store keeps it verbatim and never
// interprets it.
type FinalizationIntent struct {
	// Kind names the instruction, e.g. "tell" or "stale-failure".
	Kind string `json:"kind"`
	// Data is optional JSON for the finalizer.
	Data json.RawMessage `json:"data,omitempty"`
}

// FinalizationObservation is the complete state of a study's finalization
// claim. A claim that was never acquired reads as the vacant observation
// {Fence: 0, HeartbeatSeq: 0, Held: false}.
type FinalizationObservation struct {
	Study StudyID `json:"study"`
	// Fence is bumped by every acquisition and never decreased, not even
	// by release. A positive fence means the protocol is active for good.
	Fence uint64 `json:"fence"`
	// HeartbeatSeq counts renewals; it never decreases.
	HeartbeatSeq uint64 `json:"heartbeat_seq"`
	Held         bool   `json:"held"`
	// Holder names the current holder; empty when not held.
	Holder string `json:"holder,omitempty"`
}

// FinalizationAcquireRequest acquires a vacant or released claim, or
// reclaims a held one, if Observed is exactly the current observation. To
// reclaim a held claim the caller must first have proved Observed unchanged
// over its own grace interval; the store has no TTL and reads no clock.
type FinalizationAcquireRequest struct {
	Study    StudyID                 `json:"study"`
	Holder   string                  `json:"holder"`
	Observed FinalizationObservation `json:"observed"`
}

// FinalizationToken proves study-wide finalization ownership for one fence.
type FinalizationToken struct {
	Study  StudyID `json:"study"`
	Holder string  `json:"holder"`
	Fence  uint64  `json:"fence"`
}

// OutboxKey identifies an outbox record: the trial and the owner epoch that
// ended it. A trial ends once, so it has at most one record.
type OutboxKey struct {
	Trial TrialID `json:"trial"`
	Epoch uint64  `json:"epoch"`
}

// Compare orders keys by trial id, then epoch: the key order of ListOutbox.
func (k OutboxKey) Compare(o OutboxKey) int {
	if c := cmp.Compare(k.Trial, o.Trial); c != 0 {
		return c
	}
	return cmp.Compare(k.Epoch, o.Epoch)
}

// OutboxPhase is an outbox record's durable cursor: the finalization work
// still pending. Phases advance one at a time, in this order.
type OutboxPhase string

// The outbox phases, in order.
const (
	// PhaseInitial: committed with the terminal outcome; the after-trial
	// work (sampler state) is pending.
	PhaseInitial OutboxPhase = "initial"
	// PhaseCallbacks: after-trial state is durable; study callbacks are
	// pending.
	PhaseCallbacks OutboxPhase = "callbacks"
	// PhaseEffects: callbacks are done and the effects they discovered are
	// durable; the phase stays current until every effect is complete.
	PhaseEffects OutboxPhase = "effects"
	// PhaseDone: finalization is finished.
	PhaseDone OutboxPhase = "done"
)

// Rank returns the phase's position (1 for PhaseInitial to 4 for
// PhaseDone), or 0 for an unknown phase.
func (p OutboxPhase) Rank() int {
	switch p {
	case PhaseInitial:
		return 1
	case PhaseCallbacks:
		return 2
	case PhaseEffects:
		return 3
	case PhaseDone:
		return 4
	}
	return 0
}

// OutboxCause says which transition created an outbox record.
type OutboxCause string

// The outbox causes.
const (
	// CauseTerminal: the owner committed a terminal outcome with an intent.
	CauseTerminal OutboxCause = "terminal"
	// CauseStale: a sweeper won FailStale.
	CauseStale OutboxCause = "stale"
)

// EffectKind says how an effect is completed.
type EffectKind string

// The effect kinds.
const (
	// EffectExternal: executed outside the store and acknowledged with
	// CompleteOutboxEffect.
	EffectExternal EffectKind = "external"
	// EffectReplacement: completed by CreateReplacement, which creates the
	// trial its ReplacementSpec describes; not externally acknowledgeable.
	EffectReplacement EffectKind = "replacement"
)

// OutboxEffect is one effect a finalizer discovered, published when the
// record advances into PhaseEffects.
type OutboxEffect struct {
	// Name identifies the effect within its outbox record.
	Name string     `json:"name"`
	Kind EffectKind `json:"kind"`
	// Payload is optional JSON describing an external effect.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Replacement is required for EffectReplacement and refused otherwise.
	Replacement *ReplacementSpec `json:"replacement,omitempty"`
}

// ReplacementSpec describes the waiting trial a replacement effect creates,
// in the manner of Optuna's RetryFailedTrialCallback.
type ReplacementSpec struct {
	// MaxTrials is the budget the replacement is created under, counted as
	// for ReserveAndCreateRequest.MaxTrials.
	MaxTrials uint64 `json:"max_trials"`
	// Params are fixed on the new trial.
	Params []Param `json:"params,omitempty"`
	// States are trial-scope blobs written on the new trial.
	States []StateBlob `json:"states,omitempty"`
}

// OutboxEffectKey identifies one effect: the effect key is the idempotency
// key of CompleteOutboxEffect and CreateReplacement.
type OutboxEffectKey struct {
	Outbox OutboxKey `json:"outbox"`
	Name   string    `json:"name"`
}

// EffectCompletion records one completed effect.
type EffectCompletion struct {
	Name string `json:"name"`
	// Replacement is the result of a replacement effect.
	Replacement *ReplacementOutcome `json:"replacement,omitempty"`
}

// OutboxRecord is the durable finalization record of one terminal trial.
type OutboxRecord struct {
	Key   OutboxKey `json:"key"`
	Study StudyID   `json:"study"`
	// TerminalSeq orders the study's records by the terminal transition
	// that created them, from 1; it never changes.
	TerminalSeq uint64      `json:"terminal_seq"`
	Outcome     TrialState  `json:"outcome"`
	Cause       OutboxCause `json:"cause"`
	// Grace is the sweeper's grace interval for CauseStale.
	Grace  time.Duration      `json:"grace,omitzero"`
	Intent FinalizationIntent `json:"intent"`
	// Phase is the replay cursor.
	Phase OutboxPhase `json:"phase"`
	// Effects are the discovered effects, in name order.
	Effects []OutboxEffect `json:"effects,omitempty"`
	// Completed are the completed effects, in name order.
	Completed []EffectCompletion `json:"completed,omitempty"`
}

// OutboxAdvanceRequest moves an outbox record to Phase, the phase after its
// current one. States are the state produced by the current phase's work;
// they replace persisted state before the phase advances. Effects are
// allowed only when advancing to PhaseEffects.
type OutboxAdvanceRequest struct {
	Key     OutboxKey      `json:"key"`
	Phase   OutboxPhase    `json:"phase"`
	States  []StateBlob    `json:"states,omitempty"`
	Effects []OutboxEffect `json:"effects,omitempty"`
}

// OutboxPageRequest reads one bounded page of a study's outbox records in
// (TerminalSeq, Key) order.
type OutboxPageRequest struct {
	Study StudyID `json:"study"`
	// MaxRecords and MaxBytes bound the page. Both must be positive and
	// representable as an int; MaxBytes counts each record's JSON encoding
	// (see [RecordSize]).
	MaxRecords uint64 `json:"max_records"`
	MaxBytes   uint64 `json:"max_bytes"`
	// Cursor continues a traversal; nil starts one, fixing its horizon.
	Cursor *OutboxCursor `json:"cursor,omitempty"`
}

// OutboxCursor is the explicit, stateless continuation of a paged outbox
// traversal. The backend keeps nothing: the cursor alone says where the
// next page starts and where the traversal ends.
type OutboxCursor struct {
	Study StudyID `json:"study"`
	// Horizon is the highest TerminalSeq the traversal covers, fixed by its
	// first page, so that records committed later do not extend it.
	Horizon uint64 `json:"horizon"`
	// AfterSeq and AfterKey name the last record returned.
	AfterSeq uint64    `json:"after_seq"`
	AfterKey OutboxKey `json:"after_key"`
}

// OutboxPage is one page of outbox records. Next is nil when the traversal
// reached its horizon.
type OutboxPage struct {
	Records []OutboxRecord `json:"records"`
	Next    *OutboxCursor  `json:"next,omitempty"`
}

// OutboxEffectCompletion acknowledges an externally executed effect.
type OutboxEffectCompletion struct {
	Effect OutboxEffectKey `json:"effect"`
}

// ReplacementStatus says whether CreateReplacement created a trial.
type ReplacementStatus string

// The replacement statuses.
const (
	ReplacementCreated   ReplacementStatus = "created"
	ReplacementExhausted ReplacementStatus = "exhausted"
)

// ReplacementOutcome is the durable result of a replacement effect. Every
// replay of CreateReplacement for the effect returns the same value.
type ReplacementOutcome struct {
	Status ReplacementStatus `json:"status"`
	Trial  TrialID           `json:"trial,omitempty"`
	Number uint64            `json:"number"`
}

// FinalizedStateRequest replaces one trial-scope blob on a terminal trial.
type FinalizedStateRequest struct {
	Trial TrialID   `json:"trial"`
	State StateBlob `json:"state"`
}

// Trial is a snapshot of everything a backend holds for one trial. It is not
// part of the lifecycle contract; [Inspector] exposes it for audit and for
// the conformance suite.
type Trial struct {
	ID      TrialID `json:"id"`
	Study   StudyID `json:"study"`
	Number  uint64  `json:"number"`
	Managed bool    `json:"managed"`
	// Lease is what Observe would return.
	Lease        LeaseObservation           `json:"lease"`
	Params       []Param                    `json:"params,omitempty"`
	Intermediate []IntermediateValue        `json:"intermediate,omitempty"`
	Attrs        map[string]json.RawMessage `json:"attrs,omitempty"`
	Values       []float64                  `json:"values,omitempty"`
	States       []StateBlob                `json:"states,omitempty"`
	// ReplacementOf names the effect that created the trial, if any.
	ReplacementOf *OutboxEffectKey `json:"replacement_of,omitempty"`
}

// Study is a snapshot of a study's lifecycle state.
type Study struct {
	ID   StudyID   `json:"id"`
	Spec StudySpec `json:"spec"`
	// Trials is the number of trial records, which is also the next trial
	// number.
	Trials uint64 `json:"trials"`
	// TerminalSeq is the highest outbox TerminalSeq assigned.
	TerminalSeq  uint64                  `json:"terminal_seq"`
	Finalization FinalizationObservation `json:"finalization"`
	States       []StateBlob             `json:"states,omitempty"`
}
