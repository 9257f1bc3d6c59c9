// Package lifecycle is the trial lifecycle contract of an Optuna-like study
// storage: lease-fenced trial ownership with a durable-record budget,
// stale-owner failure without clock comparison, a study-wide finalization
// claim, and a durable outbox that drives each terminal trial's
// finalization. spec/lifecycle.md is the normative description; this
// package holds its Go shape, the in-memory reference implementation
// [MemStorage], and (in lifecycletest) the conformance suite every
// implementation must pass.
//
// # Shape
//
// [Storage] is one interface holding every method of the contract. The
// finalization and outbox extensions are methods of it too, and a backend
// without them answers [KindUnsupported] by embedding
// [UnsupportedExtensions]. The alternative, a core interface plus optional
// capability interfaces found by type assertion, was rejected for three
// reasons. A capability is then a property of the Go type, not of the
// backend: a decorator (metrics, fault injection, encryption) must either
// implement every capability and hide which ones its inner store has, or
// implement none and hide them all. A capability can depend on
// configuration known only at run time (a journal over a store with no
// atomic compare-and-append cannot offer stale failure), which a type
// cannot express but an error can. And the contract itself specifies the
// answer of a backend that lacks a capability: a typed Unsupported error,
// on which callers fail closed rather than emulate the operation from
// weaker primitives. Callers that need a small interface declare it
// themselves, as Go callers do.
//
// Every method takes a [context.Context] first and returns an error value,
// because the journal-backed implementation does I/O. The contract's
// *_with_operation variants are not separate methods: the operation id is
// request-scoped correlation that changes no outcome, which in Go is what
// a context carries (see [WithOperation]). Every request, outcome and
// record type is plain data with JSON tags, so that each transition can be
// written as one journal record.
//
// # Errors
//
// Every error is an [*Error] whose [Kind] says what the caller should do;
// test with errors.Is against ErrNotFound, ErrLeaseLost, ErrConflict,
// ErrIncompatible, ErrResourceLimit, ErrUnsupported, ErrStorage and
// ErrInvalid, or with [KindOf]. ErrInvalid is this package's name for the
// contract's "validation error": a malformed request that no retry can fix.
// Any error other than KindStorage guarantees that nothing was written.
//
// # The clock rule
//
// Nothing in this package compares clocks. A trial's lease does not expire:
// it ends when its owner commits a terminal outcome or pauses, or when a
// sweeper wins [Storage.FailStale] with an observation it proved unchanged
// over its own grace interval ([FailIfStale] does that correctly). The
// owner's heartbeat timestamp is carried for people and compared only for
// equality, as one field of the complete observation. The finalization
// claim has no TTL at all; it is reclaimed the same way.
//
// # On the journal
//
// [JournalStorage] carries the contract on a journal store (package
// store): a study is a case, a trial is a run, a trial's owner epoch is its
// run's lease epoch, each transition is a journal record appended under the
// fence, the outbox and the finalization claim are state derived from
// records, and a trial's terminal outcome seals its run, so a study is
// exported, disclosed and verified like any other runs. A per-study "study
// run" holds the records that commit every transition touching two runs;
// the trial run mirrors each, and a view rebuilt after a crash completes
// what a commit began. One JournalStorage at a time serves a journal
// tenant: it holds an OS lock beside the journal's file until Close, and a
// second is refused with [ErrLocked]. [ReadStudyView] shows a study from a
// journal without writing. spec/lifecycle.md section 14 describes the records and the
// protocol.
package lifecycle
