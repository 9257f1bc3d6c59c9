// Package store defines the journal: an append-only, hash-chained history of
// workflow runs whose guarantees are storage invariants, not application
// logic, because application logic can be bypassed by the next caller and a
// constraint cannot.
//
// A Journal guarantees, each inside one store transaction:
//
//   - Fencing: while a run has a lease, an append or seal whose epoch is not
//     the lease's current epoch is refused (FencedError), stale or future.
//   - Exactly-once: a second EffectStarted for one effect key in one run is
//     refused (DuplicateEffectError).
//   - Chaining: seqs are contiguous from 1 and each record's prev_hash is the
//     run's previous head; hash = SHA-256(prev_hash || raw).
//   - Whole batches: a batch names one run and commits entirely or not at all.
//   - Sealing freezes: a sealed run refuses every append (RunSealedError).
//   - Derived indexes (outcome, admission key, source, activity, case,
//     waiting) are written with the record that implies them, so they can
//     always be rebuilt from the journal and are never an authority.
//
// Every refusal is a typed error (FencedError, CorruptError, ...) that
// matches exactly one sentinel class (ErrFenced, ErrCorrupt, ...) with
// errors.Is, so a caller maps classes with one switch and reads the data
// with errors.As.
//
// Journal is the union of role interfaces (Appender, Reader, Finder,
// Leaser, Sealer, LogReader, Canceller); Backend adds the operator stores
// kept beside it. Verification vouches only for what it reads: Verify
// checks one run's chain, seal and outcome index, and LogVerifier.VerifyLog
// the Merkle log node by node against the sealed runs and the signed
// checkpoints.
//
// Record encoding and chain hashing are specified in spec/records.md.
// Backends live in sub-packages (store/sqlite, store/postgres) and prove
// themselves with the conformance suite in store/storetest.
package store

import (
	"context"
	"fmt"
	"time"
)

// Lease is a run's ownership: the fencing epoch to write under, until Expires.
type Lease struct {
	Run     RunID     `json:"run"`
	Owner   string    `json:"owner"`
	Epoch   Epoch     `json:"epoch"`
	Expires time.Time `json:"expires"`
}

// Cancellation is a durable stop request, stored beside the chain.
type Cancellation struct {
	Actor  Operator  `json:"actor"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Activity is a run's place in the activity order: its last append time in
// whole Unix seconds. Listings order by (At, Run) descending, a total order.
type Activity struct {
	Run RunID  `json:"run"`
	At  uint64 `json:"at"`
}

// Checkpoint commits to the set of sealed runs of one tenant: the log's
// origin, its size and its RFC 6962 root.
type Checkpoint struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   Digest `json:"root"`
}

// Inclusion proves a sealed run is a leaf of the log at Size.
type Inclusion struct {
	Index uint64   `json:"index"` // seal order, from 0
	Size  uint64   `json:"size"`  // the tree size the proof is for
	Leaf  Digest   `json:"leaf"`  // the run's terminal chain hash
	Proof []Digest `json:"proof"` // siblings, leaf upwards
}

// Position is where a sealed run sits in the log.
type Position struct {
	Index uint64 `json:"index"`
	Leaf  Digest `json:"leaf"`
}

// Journal is the store contract: the union of the roles below, plus the
// facts about the durable state that have no default. Every method with a
// context does I/O; every listing is bounded by a limit from 1 to MaxLimit,
// and a page of limit results means "at least that many", not "exactly". A
// stored id that does not parse is CorruptError, never skipped.
//
// A consumer declares the narrow interface it uses (one role, or the few
// methods it calls, as sumdb/tlog's HashReader), so that a double or a
// decorator implements what is called and nothing else.
type Journal interface {
	Appender
	Reader
	Finder
	Leaser
	Sealer
	LogReader
	Canceller

	// IsShared reports whether more than one process can write the durable
	// state. There is no default: a shared store that forgot to say so would
	// pass as single-writer.
	IsShared() bool
	// Seals reports whether the store rewrites payloads on append (as an
	// encrypting decorator does). A restore refuses such a store.
	Seals() bool
	// Tenant names whose rows this handle reaches ("default" unless told).
	Tenant() string
	// Atomic returns the store's own transaction for co-located resources,
	// or nil when the backend cannot offer one.
	Atomic() AtomicJournal
}

// Appender is the append role: the only way records enter a journal.
type Appender interface {
	// Append writes a batch of one run under epoch, assigning seqs and
	// linking the chain; all or nothing. A run whose row says it is open
	// while the log holds its head as a leaf (its seal was edited away) is
	// refused with a CorruptError (LoggedUnsealed), nothing written.
	Append(ctx context.Context, epoch Epoch, batch []Append) ([]Record, error)
}

// Reader is the read role: a run's records and its chain.
type Reader interface {
	// Read returns a run's records from seq from (1-based) onward, unbounded;
	// for replay and export.
	Read(ctx context.Context, run RunID, from Seq) ([]Record, error)
	// ReadPage returns at most limit records from from; it bounds what is
	// read, not only what is returned.
	ReadPage(ctx context.Context, run RunID, from Seq, limit int) ([]Record, error)
	// ReadStored returns a page of a run's records from from as stored,
	// bounded in bytes as well as in count: at most limit records and,
	// past the first (always returned, whatever its size), only while
	// their Raw totals at most maxBytes. It reads at most one record past
	// that bound, and no further, so a page of large records costs its
	// byte bound and not its limit. next is the seq of the record the byte
	// bound left out, 0 when none was (the page ended at its limit or at
	// the run's head). Each record is checked against its hash and its
	// link, as ReadPage's are; a decorator passes the stored bytes through
	// without opening them, and Fields is nil (the fields are in Raw), so
	// a page holds its bytes once.
	ReadStored(ctx context.Context, run RunID, from Seq, limit, maxBytes int) (recs []Record, next Seq, err error)
	// Head returns the run's chain head; the genesis head for an unknown run.
	Head(ctx context.Context, run RunID) (Head, error)
	// Verify checks a run's whole chain and returns its head hash: each
	// record's hash and link, contiguous seqs, the recorded head, the
	// outcome index against the chain's latest conclusion, and for a sealed
	// run its leaf (the terminal hash) and its sealed outcome (the chain's
	// latest conclusion); and against the log (CheckRunLeaves): a sealed
	// run's head must be the leaf at its log index, and no record of an
	// open run a leaf. A failure is CorruptError.
	Verify(ctx context.Context, run RunID) (Digest, error)
}

// Finder is the discovery role: the derived indexes, every one rebuilt
// from the chain and never an authority.
type Finder interface {
	// RunsByOutcome lists runs whose latest conclusion is outcome, newest
	// conclusion first.
	RunsByOutcome(ctx context.Context, outcome string, limit int) ([]RunID, error)
	// CountByOutcome counts the runs whose latest conclusion is outcome,
	// from the same index as RunsByOutcome and never from a page of it; a
	// row it cannot read is CorruptError, as for the listing.
	CountByOutcome(ctx context.Context, outcome string) (uint64, error)
	// AdmittedAs returns the run holding an admission key, if any.
	AdmittedAs(ctx context.Context, key string) (RunID, bool, error)
	// ForgetAdmissions retires admission keys claimed before olderThan and
	// returns how many; the runs and their records are untouched.
	ForgetAdmissions(ctx context.Context, olderThan time.Time) (int, error)
	// RecentRuns lists runs by last append, newest first, strictly after the
	// cursor (nil: from the top), ties broken by run id descending.
	RecentRuns(ctx context.Context, after *Activity, limit int) ([]Activity, error)
	// RunsByID lists every run with records, by id ascending, strictly after
	// after (nil: from the start).
	RunsByID(ctx context.Context, after *RunID, limit int) ([]RunID, error)
	// RecentRunsFrom is RecentRuns narrowed to runs admitted by source.
	RecentRunsFrom(ctx context.Context, source string, after *Activity, limit int) ([]Activity, error)
	// CaseHistory returns every record stamped with the case, whichever run
	// wrote it, oldest first.
	CaseHistory(ctx context.Context, c CaseID, limit int) ([]Record, error)
	// CaseRuns lists the runs that wrote at least one record stamped with
	// the case, by id ascending, strictly after after (nil: from the start);
	// it is how a disclosure finds everything a case touched.
	CaseRuns(ctx context.Context, c CaseID, after *RunID, limit int) ([]RunID, error)
	// WaitingRuns lists runs whose last record is a suspension, soonest
	// until first (suspensions with no until last).
	WaitingRuns(ctx context.Context, limit int) ([]WaitingRun, error)
}

// Leaser is the lease role: ownership of a run and its fencing epoch.
type Leaser interface {
	// Acquire claims a free lease (never granted, released or expired) and
	// always bumps the epoch; the first lease of a run moves past every
	// epoch already in its chain. A live lease is LeaseHeldError, even for
	// its own holder. TTLs have whole-second granularity; under 1s is
	// refused.
	Acquire(ctx context.Context, run RunID, owner string, ttl time.Duration) (Lease, error)
	// Renew extends a live lease held by exactly (owner, epoch), keeping the
	// epoch; anything else is LeaseNotHeldError. It never claims.
	Renew(ctx context.Context, run RunID, owner string, epoch Epoch, ttl time.Duration) (Lease, error)
	// ReleaseLease hands a lease back if epoch is the one holding it; it
	// keeps the epoch, is idempotent and never an error for a non-holder.
	ReleaseLease(ctx context.Context, run RunID, epoch Epoch) error
	// AbandonedRuns lists runs whose lease expired without release, oldest
	// expiry first: the runs an instance died holding.
	AbandonedRuns(ctx context.Context, limit int) ([]RunID, error)
}

// Sealer is the seal role.
type Sealer interface {
	// Seal freezes a run whose latest conclusion is a sealing outcome, makes
	// its head hash the next leaf of the tenant's log in the same
	// transaction, and returns that hash. First seal wins; a re-seal returns
	// the same digest and changes nothing. A run whose row says it is open
	// while the log already holds its head is refused as Append refuses
	// it, never given a second leaf.
	Seal(ctx context.Context, run RunID, epoch Epoch, outcome string) (Digest, error)
}

// LogReader is the log role: the Merkle log of sealed runs and its proofs.
type LogReader interface {
	// Checkpoint returns the log's current origin, size and root.
	Checkpoint(ctx context.Context) (Checkpoint, error)
	// ConsistencyProof proves the log at newSize extends the log at oldSize.
	// oldSize > newSize, or newSize beyond the log, is refused.
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]Digest, error)
	// InclusionProof proves a sealed run is in the current log; nil for a run
	// that is not sealed, which is an answer and not an error.
	InclusionProof(ctx context.Context, run RunID) (*Inclusion, error)
	// InclusionProofAt proves a sealed run is in the log as it stood at size
	// leaves; nil when the run is unsealed or was sealed at or after size.
	InclusionProofAt(ctx context.Context, run RunID, size uint64) (*Inclusion, error)
	// LogPositions returns each run's index and leaf, or nil if unsealed, in
	// the order asked.
	LogPositions(ctx context.Context, runs []RunID) ([]*Position, error)
}

// Canceller is the cancellation role: stop requests kept beside the chain.
type Canceller interface {
	// RequestCancel records a stop request beside the chain, unfenced;
	// false if a request was already recorded (the first asker is kept).
	RequestCancel(ctx context.Context, run RunID, actor Operator, reason string) (bool, error)
	// Cancellation returns the pending stop request, or nil.
	Cancellation(ctx context.Context, run RunID) (*Cancellation, error)
}

// Backend is everything a journal backend keeps: the journal and the
// operator stores beside it. store/sqlite and store/postgres implement it;
// a decorator of the journal alone implements Journal.
type Backend interface {
	Journal
	CheckpointStore
	PublicationStore
	TokenStore
	DisclosureRegister
	LogVerifier
	// Origin names the log in checkpoints (with "/<tenant>" for a tenant
	// other than the default).
	Origin() string
}

// AtomicJournal lets a co-located SQL resource commit in the journal's own
// transaction, so compensation never has to run.
type AtomicJournal interface {
	// AppendAtomic checks the fence, runs work inside the journal's
	// transaction, then appends the records work returns, all in one commit.
	// A lost COMMIT acknowledgement is CommitUnknownError, never an abort.
	AppendAtomic(ctx context.Context, run RunID, epoch Epoch, work func(ctx context.Context, tx AtomicTx) ([]Append, error)) ([]Record, error)
}

// AtomicTx is the slice of the journal's transaction a member may use.
type AtomicTx interface {
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Row is one result row of AtomicTx.QueryRow.
type Row interface {
	Scan(dest ...any) error
}

// DefaultTenant is the tenant a store serves until told otherwise.
const DefaultTenant = "default"

// MaxLimit bounds every listing and page.
const MaxLimit = 10000

// MinTTL is the shortest lease: timing has whole-second granularity and a
// TTL that truncates to zero seconds is refused, not rounded up.
const MinTTL = time.Second

// MaxTTL bounds a lease so that its expiry can never overflow any backend's
// time type; no real lease needs a century.
const MaxTTL = 100 * 365 * 24 * time.Hour

// ValidateLimit refuses a listing limit outside 1..MaxLimit.
func ValidateLimit(limit int) error {
	if limit < 1 || limit > MaxLimit {
		return &InvalidArgumentError{Field: "limit", Detail: "must be from 1 to 10000"}
	}
	return nil
}

// TTLSeconds validates a lease TTL and returns its whole seconds.
func TTLSeconds(ttl time.Duration) (int64, error) {
	if ttl < MinTTL {
		return 0, &InvalidArgumentError{Field: "ttl", Detail: "truncates to zero whole seconds; leases are at least 1s"}
	}
	if ttl > MaxTTL {
		return 0, &InvalidArgumentError{Field: "ttl", Detail: "longer than 100 years"}
	}
	return int64(ttl / time.Second), nil
}

// ValidateOwner refuses a blank or oversized lease owner.
func ValidateOwner(owner string) error {
	if owner == "" || len(owner) > 256 {
		return &InvalidArgumentError{Field: "owner", Detail: "must be 1 to 256 bytes"}
	}
	return nil
}

// ValidateEpoch refuses epoch 0: epochs start at 1.
func ValidateEpoch(e Epoch) error {
	if e == 0 || e > 1<<62 {
		return &InvalidArgumentError{Field: "epoch", Detail: "must be from 1 to 2^62"}
	}
	return nil
}

// SignedCheckpoint is a checkpoint of the log signed with the log's note
// key, as the journal keeps it: the note is exactly what was published.
type SignedCheckpoint struct {
	Size     uint64    `json:"size"`
	Root     Digest    `json:"root"`
	Note     []byte    `json:"note"`
	SignedAt time.Time `json:"signed_at"`
}

// CheckpointStore keeps the log's signed checkpoints beside the journal.
// Signing is the caller's (the store never holds the key); the store checks
// that what it keeps commits to its own tree.
type CheckpointStore interface {
	// SaveCheckpoint keeps a signed checkpoint. Its root must be the log's
	// root at its size, or it is refused. A size already kept keeps its first
	// note, which is returned: one size is never signed two ways.
	SaveCheckpoint(ctx context.Context, sc SignedCheckpoint) (SignedCheckpoint, error)
	// LatestCheckpoint returns the largest signed checkpoint kept, or nil.
	LatestCheckpoint(ctx context.Context) (*SignedCheckpoint, error)
	// SignedCheckpointAt returns the signed checkpoint kept for size, or nil.
	SignedCheckpointAt(ctx context.Context, size uint64) (*SignedCheckpoint, error)
	// CheckpointAt returns the log's (unsigned) checkpoint as it stood at
	// size leaves; size beyond the log is refused.
	CheckpointAt(ctx context.Context, size uint64) (Checkpoint, error)
}

// A Publication is one signed checkpoint queued for one witness: the
// outbox row the publisher works from. It stays pending until that witness
// cosigns this size or a larger one.
type Publication struct {
	Witness     string    `json:"witness"`
	Size        uint64    `json:"size"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt"`
	LastError   string    `json:"last_error,omitempty"`
}

// PublicationStore is the durable outbox of checkpoint publications and the
// cosignatures they earned. Because it lives in the journal store, a
// publisher that restarts resumes exactly where the last one stopped: a
// queued publication is never lost, and a cosigned one is never sent again.
//
// The store keeps cosignature lines as it is handed them; verifying them
// against the witness's key before RecordCosignature is the caller's duty,
// since the store knows no keys.
type PublicationStore interface {
	// EnqueuePublication queues the signed checkpoint kept at size for each
	// witness, due at once. It is idempotent, and a witness that already
	// cosigned size or a larger one is not queued. For a witness with a
	// publication pending, the new one takes over that one's attempts,
	// next attempt and last error: a log that signs often must neither
	// reset the backoff of a failing witness nor hide its failure.
	EnqueuePublication(ctx context.Context, size uint64, witnesses []string) error
	// NextPublication returns the witness's pending publication of the
	// largest size (a witness need only cosign the newest checkpoint), or
	// nil when none is pending.
	NextPublication(ctx context.Context, witness string) (*Publication, error)
	// DeferPublication records a failed attempt at size and when to try
	// again, for size and for every newer size queued for the witness
	// while the attempt ran.
	DeferPublication(ctx context.Context, witness string, size uint64, next time.Time, lastErr string) error
	// RecordCosignature keeps a verified cosignature by witness on the
	// checkpoint at size, raises the witness's last cosigned size, and
	// settles every pending publication of size or below for that witness.
	RecordCosignature(ctx context.Context, witness string, size uint64, lines []byte) error
	// LastCosigned returns the largest size the witness cosigned (0, false
	// if none): the old size of its next consistency proof.
	LastCosigned(ctx context.Context, witness string) (uint64, bool, error)
	// Cosignatures returns the cosignature lines kept for size, by witness.
	Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error)
	// MarkWitnessed keeps note (the checkpoint at size with the cosignatures
	// that met the policy) as witnessed. Idempotent; the first note is kept.
	MarkWitnessed(ctx context.Context, size uint64, note []byte) error
	// LatestWitnessed returns the witnessed checkpoint of the largest size,
	// its Note carrying the cosignatures, or nil.
	LatestWitnessed(ctx context.Context) (*SignedCheckpoint, error)
}

// Token roles.
const (
	RoleReader = "reader" // reads, listings, proofs
	RoleWriter = "writer" // everything a reader may, plus append, leases, seal, cancel
)

// A Token is an API bearer token as stored: never its secret, only the
// SHA-256 of it. A token reaches one tenant with one role.
type Token struct {
	ID      string     `json:"id"`
	Tenant  string     `json:"tenant"`
	Role    string     `json:"role"`
	Name    string     `json:"name,omitempty"`
	Hash    Digest     `json:"-"`
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// TokenStore keeps API tokens. Tokens are server-wide rows (each names its
// tenant), so any tenant's handle reaches all of them.
type TokenStore interface {
	// CreateToken keeps t; an id already used is an InvalidArgumentError.
	CreateToken(ctx context.Context, t Token) error
	// Tokens lists every token, revoked ones included, by creation.
	Tokens(ctx context.Context) ([]Token, error)
	// RevokeToken revokes the token id; false if there is no such live token.
	RevokeToken(ctx context.Context, id string) (bool, error)
	// TokenByID returns the token id, revoked or not, or nil. Callers
	// compare the hash themselves, in constant time.
	TokenByID(ctx context.Context, id string) (*Token, error)
}

// ValidateTenant refuses tenant names that could not be a path segment of
// a log origin.
func ValidateTenant(t string) error {
	if t == "" || len(t) > 64 {
		return &InvalidArgumentError{Field: "tenant", Detail: "must be 1 to 64 characters"}
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return &InvalidArgumentError{Field: "tenant", Detail: fmt.Sprintf("%q has a character outside [a-z0-9._-]", t)}
		}
	}
	return nil
}

// ValidateOrigin refuses an origin a checkpoint could not carry: empty,
// over 255 bytes, or with whitespace or control characters.
func ValidateOrigin(o string) error {
	if o == "" || len(o) > 255 {
		return &InvalidArgumentError{Field: "origin", Detail: "must be 1 to 255 bytes"}
	}
	for _, r := range o {
		if r <= 0x20 || r == 0x7f || r == '\u2014' {
			return &InvalidArgumentError{Field: "origin", Detail: fmt.Sprintf("%q contains whitespace, a control character or an em dash", o)}
		}
	}
	return nil
}
