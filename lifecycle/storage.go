package lifecycle

import "context"

// Storage is the trial lifecycle contract: atomic ownership and lifecycle
// operations of a study storage backend. Every method checks its
// preconditions and commits its writes in one lock or transaction, and on
// any error commits nothing (a KindStorage error from a backend that does
// I/O may leave the outcome unknown).
//
// The first eight methods are the core every implementation provides. The
// rest are the finalization and outbox extensions; a backend without them
// embeds [UnsupportedExtensions], which answers KindUnsupported, and must
// never emulate them from weaker primitives.
//
// Operation correlation (the contract's *_with_operation variants) travels
// in the context: see [WithOperation].
type Storage interface {
	// ReserveAndCreateIfBudget creates a waiting trial, consuming the next
	// trial number, if the study holds fewer than MaxTrials trial records;
	// otherwise it answers Exhausted and consumes nothing.
	// Errors: NotFound (study), Invalid, Storage.
	ReserveAndCreateIfBudget(ctx context.Context, req ReserveAndCreateRequest) (ReservationOutcome, error)

	// Abandon fails a waiting, never-claimed reservation. It returns true
	// when this call made it Failed and false when a claim or abandon
	// already consumed it.
	// Errors: NotFound, Unsupported (unmanaged trial), Storage.
	Abandon(ctx context.Context, req AbandonRequest) (bool, error)

	// Observe reads the complete current lease observation of a trial.
	// Errors: NotFound, Unsupported (unmanaged trial), Storage.
	Observe(ctx context.Context, trial TrialID) (LeaseObservation, error)

	// Claim claims a waiting or paused trial, writes its initial
	// parameters and trial-scope state, and starts a new owner epoch.
	// Errors: LeaseLost (not claimable), NotFound, Unsupported, Conflict
	// (immutable parameter), Incompatible, Invalid, ResourceLimit, Storage;
	// each leaves the trial unchanged.
	Claim(ctx context.Context, req ClaimRequest) (TrialOwnerToken, error)

	// Renew records a heartbeat of the exact current owner and returns the
	// new observation.
	// Errors: LeaseLost (stale token; nothing written), NotFound,
	// Unsupported, Invalid, Storage.
	Renew(ctx context.Context, req RenewRequest) (LeaseObservation, error)

	// FailStale fails a running trial if its complete current lease equals
	// req.Observed, compared atomically and without any clock. It returns
	// true for the sole winner, which commits the Failed outcome and an
	// Initial outbox record keyed by the observed trial and epoch with
	// req.Intent; a mismatch, or a trial that is not running, returns false
	// and commits nothing.
	// Errors: NotFound, Unsupported (unmanaged trial), Invalid, Storage.
	FailStale(ctx context.Context, req FailStaleRequest) (bool, error)

	// FencedMutate applies one mutation if the owner token is exactly
	// current. Study-scope state needs the finalization owner once the
	// study's protocol is active, so it fails with LeaseLost there: use
	// MutateOwned.
	// Errors: LeaseLost, NotFound, Unsupported, Conflict, Incompatible,
	// Invalid, ResourceLimit, Storage; each writes nothing.
	FencedMutate(ctx context.Context, req FencedMutationRequest) error

	// Terminal validates and commits a terminal outcome, with no outbox
	// record, if the owner token is exactly current.
	// Errors: as FencedMutate.
	Terminal(ctx context.Context, req TerminalRequest) error

	// ObserveFinalization reads the study's finalization claim without
	// creating it or activating the protocol; a claim never acquired reads
	// as vacant.
	// Errors: NotFound, Unsupported, Storage.
	ObserveFinalization(ctx context.Context, study StudyID) (FinalizationObservation, error)

	// AcquireFinalization acquires or reclaims the study's finalization
	// claim if req.Observed is exactly the current observation, bumping the
	// fence. There is no TTL and no clock.
	// Errors: Conflict (observation mismatch: ordinary contention),
	// NotFound, Invalid, Unsupported, Storage.
	AcquireFinalization(ctx context.Context, req FinalizationAcquireRequest) (FinalizationToken, error)

	// RenewFinalization records a heartbeat of the exact current holder.
	// Errors: LeaseLost (stale or released token), NotFound, Unsupported,
	// Storage.
	RenewFinalization(ctx context.Context, token FinalizationToken) (FinalizationObservation, error)

	// ReleaseFinalization releases the claim. The fence is kept, so every
	// earlier token stays stale, and the protocol stays active.
	// Errors: LeaseLost (stale or already released), NotFound,
	// Unsupported, Storage.
	ReleaseFinalization(ctx context.Context, token FinalizationToken) error

	// TerminalWithIntent commits a terminal outcome and its Initial outbox
	// record as one operation and returns the record's key.
	// Errors: as Terminal.
	TerminalWithIntent(ctx context.Context, req TerminalRequest, intent FinalizationIntent) (OutboxKey, error)

	// TerminalWithIntentOwned is TerminalWithIntent under the study's
	// finalization owner, which must be exactly current even when the
	// request carries no study-scope state.
	// Errors: as Terminal.
	TerminalWithIntentOwned(ctx context.Context, owner FinalizationToken, req TerminalRequest, intent FinalizationIntent) (OutboxKey, error)

	// MutateOwned is FencedMutate under the study's finalization owner.
	// Errors: as FencedMutate.
	MutateOwned(ctx context.Context, owner FinalizationToken, req FencedMutationRequest) error

	// AdvanceOutbox persists req.States and req.Effects and moves the
	// record to req.Phase, returning the durable cursor. A phase at or
	// before the cursor is a no-op replay; a skipped phase is a conflict;
	// PhaseEffects stays current (and is returned) until every effect is
	// complete. Once the study's finalization protocol is active, only
	// AdvanceOutboxOwned may advance.
	// Errors: NotFound, Conflict, Incompatible, LeaseLost, Invalid,
	// ResourceLimit, Unsupported, Storage.
	AdvanceOutbox(ctx context.Context, req OutboxAdvanceRequest) (OutboxPhase, error)

	// AdvanceOutboxOwned is AdvanceOutbox under the study's finalization
	// owner.
	// Errors: as AdvanceOutbox.
	AdvanceOutboxOwned(ctx context.Context, owner FinalizationToken, req OutboxAdvanceRequest) (OutboxPhase, error)

	// GetOutbox reads one outbox record; ok is false when none exists.
	// Errors: Unsupported, Storage.
	GetOutbox(ctx context.Context, key OutboxKey) (rec OutboxRecord, ok bool, err error)

	// ListOutbox lists every outbox record, done ones included, in key
	// order. It is unbounded; use ListOutboxPage to traverse a study.
	// Errors: Unsupported, Storage.
	ListOutbox(ctx context.Context) ([]OutboxRecord, error)

	// ListOutboxPage reads one bounded page of a study's outbox records.
	// Errors: ResourceLimit (zero or unrepresentable limit, or a record
	// larger than MaxBytes), Conflict (foreign or inconsistent cursor),
	// NotFound (study), Unsupported, Storage.
	ListOutboxPage(ctx context.Context, req OutboxPageRequest) (OutboxPage, error)

	// CompleteOutboxEffect idempotently acknowledges an external effect.
	// Errors: NotFound, Conflict (a replacement effect), Unsupported,
	// Storage.
	CompleteOutboxEffect(ctx context.Context, req OutboxEffectCompletion) error

	// CreateReplacement idempotently creates the trial a replacement effect
	// describes and completes the effect. The effect key is the
	// idempotency key: a replay returns the recorded outcome.
	// Errors: NotFound, Conflict (not a replacement effect), Incompatible,
	// Unsupported, Storage.
	CreateReplacement(ctx context.Context, effect OutboxEffectKey) (ReplacementOutcome, error)

	// PutFinalizedState replaces one trial-scope blob on a terminal trial.
	// Repeating the same blob is a no-op.
	// Errors: NotFound, Conflict (nonterminal trial, study scope,
	// constraint state), Incompatible, Unsupported, Invalid, Storage.
	PutFinalizedState(ctx context.Context, req FinalizedStateRequest) error
}

// Inspector reads what a backend holds for a study or trial. It is not part
// of the lifecycle contract: auditors and the conformance suite use it to
// see what each transition wrote.
type Inspector interface {
	// InspectStudy returns a snapshot of a study. Errors: NotFound, Storage.
	InspectStudy(ctx context.Context, study StudyID) (Study, error)
	// InspectTrial returns a snapshot of a trial, managed or not.
	// Errors: NotFound, Storage.
	InspectTrial(ctx context.Context, trial TrialID) (Trial, error)
}

// UnsupportedExtensions answers every extension method of [Storage] with
// KindUnsupported. A backend that provides only the core eight methods
// embeds it; Go has no default methods, and this keeps such a backend
// compiling against a growing interface while its callers fail closed.
type UnsupportedExtensions struct{}

func unsupported(op string) error {
	return NewError(KindUnsupported, op, "backend has no finalization/outbox capability")
}

// ObserveFinalization answers KindUnsupported.
func (UnsupportedExtensions) ObserveFinalization(context.Context, StudyID) (FinalizationObservation, error) {
	return FinalizationObservation{}, unsupported("observe_finalization")
}

// AcquireFinalization answers KindUnsupported.
func (UnsupportedExtensions) AcquireFinalization(context.Context, FinalizationAcquireRequest) (FinalizationToken, error) {
	return FinalizationToken{}, unsupported("acquire_finalization")
}

// RenewFinalization answers KindUnsupported.
func (UnsupportedExtensions) RenewFinalization(context.Context, FinalizationToken) (FinalizationObservation, error) {
	return FinalizationObservation{}, unsupported("renew_finalization")
}

// ReleaseFinalization answers KindUnsupported.
func (UnsupportedExtensions) ReleaseFinalization(context.Context, FinalizationToken) error {
	return unsupported("release_finalization")
}

// TerminalWithIntent answers KindUnsupported: a backend must not emulate it
// with a terminal write followed by a separate outbox write.
func (UnsupportedExtensions) TerminalWithIntent(context.Context, TerminalRequest, FinalizationIntent) (OutboxKey, error) {
	return OutboxKey{}, unsupported("terminal_with_intent")
}

// TerminalWithIntentOwned answers KindUnsupported.
func (UnsupportedExtensions) TerminalWithIntentOwned(context.Context, FinalizationToken, TerminalRequest, FinalizationIntent) (OutboxKey, error) {
	return OutboxKey{}, unsupported("terminal_with_intent_owned")
}

// MutateOwned answers KindUnsupported.
func (UnsupportedExtensions) MutateOwned(context.Context, FinalizationToken, FencedMutationRequest) error {
	return unsupported("mutate_owned")
}

// AdvanceOutbox answers KindUnsupported.
func (UnsupportedExtensions) AdvanceOutbox(context.Context, OutboxAdvanceRequest) (OutboxPhase, error) {
	return "", unsupported("advance_outbox")
}

// AdvanceOutboxOwned answers KindUnsupported.
func (UnsupportedExtensions) AdvanceOutboxOwned(context.Context, FinalizationToken, OutboxAdvanceRequest) (OutboxPhase, error) {
	return "", unsupported("advance_outbox_owned")
}

// GetOutbox answers KindUnsupported.
func (UnsupportedExtensions) GetOutbox(context.Context, OutboxKey) (OutboxRecord, bool, error) {
	return OutboxRecord{}, false, unsupported("get_outbox")
}

// ListOutbox answers KindUnsupported.
func (UnsupportedExtensions) ListOutbox(context.Context) ([]OutboxRecord, error) {
	return nil, unsupported("list_outbox")
}

// ListOutboxPage answers KindUnsupported: a backend must not claim bounded
// traversal by listing everything and trimming.
func (UnsupportedExtensions) ListOutboxPage(context.Context, OutboxPageRequest) (OutboxPage, error) {
	return OutboxPage{}, unsupported("list_outbox_page")
}

// CompleteOutboxEffect answers KindUnsupported.
func (UnsupportedExtensions) CompleteOutboxEffect(context.Context, OutboxEffectCompletion) error {
	return unsupported("complete_outbox_effect")
}

// CreateReplacement answers KindUnsupported.
func (UnsupportedExtensions) CreateReplacement(context.Context, OutboxEffectKey) (ReplacementOutcome, error) {
	return ReplacementOutcome{}, unsupported("create_replacement")
}

// PutFinalizedState answers KindUnsupported.
func (UnsupportedExtensions) PutFinalizedState(context.Context, FinalizedStateRequest) error {
	return unsupported("put_finalized_state")
}

type operationKey struct{}

// WithOperation returns a context that carries op as the caller's operation
// id. Backends that record request correlation read it with
// [OperationFrom]; none may let it change an outcome. This replaces the
// contract's *_with_operation variants: in Go, request-scoped correlation
// is what a context is for, and one mechanism covers every method.
func WithOperation(ctx context.Context, op OperationID) context.Context {
	return context.WithValue(ctx, operationKey{}, op)
}

// OperationFrom returns the operation id ctx carries, or NoOperation.
func OperationFrom(ctx context.Context) OperationID {
	op, _ := ctx.Value(operationKey{}).(OperationID)
	return op
}
