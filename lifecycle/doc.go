// Package lifecycle is the trial lifecycle contract of an Optuna-like study
// storage: lease-fenced trial ownership with a durable-record budget,
// stale-owner failure without clock comparison, a study-wide finalization
// claim, and a durable outbox that drives each terminal trial's
// finalization. spec/lifecycle.md is the normative description; this
// package holds its Go shape; lifecycle/memstore is the in-memory
// reference implementation, lifecycle/journalstore the journal-backed one,
// and lifecycle/lifecycletest the conformance suite every implementation
// must pass.
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
// This is the house convention (CONTRIBUTING.md) in the shape its second
// clause allows: the Err* values are the sentinels a caller branches on
// with errors.Is; [*Error] is the typed error carrying the data (Op,
// Detail), whose Is matches exactly the sentinel of its Kind because its
// Unwrap already leads to the cause (a store error, a context error), so
// errors.Is(err, store.ErrFenced) or errors.Is(err, context.Canceled)
// still holds through it. Implementations add their own classes beneath
// KindStorage the same way: package journalstore's ErrInconsistent (with
// *InconsistentError naming the record that does not fold) and ErrClosed,
// and its ErrLocked (with *LockedError) beneath KindConflict.
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
// # Implementations
//
// Two implementations live beside this package and share one copy of the
// per-study rules (lifecycle/internal/model): package memstore, the
// in-memory reference implementation, and package journalstore, which
// carries the contract on a journal store so that a study is exported,
// disclosed and verified like any other runs (spec/lifecycle.md section
// 14). This package holds only the contract: types, validation, errors and
// [FailIfStale].
package lifecycle
