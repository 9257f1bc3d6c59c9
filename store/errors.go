package store

import (
	"errors"
	"fmt"
	"time"
)

// The classes of error a store returns. Callers branch with errors.Is on
// these; the typed errors below carry the data (errors.As) and each matches
// exactly one of them, so a mapping to HTTP statuses or exit codes is one
// switch over sentinels.
var (
	// ErrFenced matches *FencedError: the caller's epoch is not the lease's.
	ErrFenced = errors.New("fenced")
	// ErrLeaseHeld matches *LeaseHeldError: a live lease exists.
	ErrLeaseHeld = errors.New("lease held")
	// ErrLeaseNotHeld matches *LeaseNotHeldError: the caller does not hold
	// the lease it names.
	ErrLeaseNotHeld = errors.New("lease not held")
	// ErrRunSealed matches *RunSealedError: the run is frozen.
	ErrRunSealed = errors.New("run sealed")
	// ErrDuplicateEffect matches *DuplicateEffectError.
	ErrDuplicateEffect = errors.New("effect already started")
	// ErrDuplicateAdmission matches *DuplicateAdmissionError.
	ErrDuplicateAdmission = errors.New("admission key already held")
	// ErrRecordTooLarge matches *RecordTooLargeError.
	ErrRecordTooLarge = errors.New("record too large")
	// ErrCorrupt matches *CorruptError: stored state fails verification.
	ErrCorrupt = errors.New("corrupt journal")
	// ErrCommitUnknown matches *CommitUnknownError: the write may or may
	// not have landed.
	ErrCommitUnknown = errors.New("commit outcome unknown")
	// ErrNotFound matches *NotFoundError.
	ErrNotFound = errors.New("not found")
	// ErrInvalidArgument matches *InvalidArgumentError: a value from
	// outside is refused.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrErased matches *ErasedError: the record would be sealed under a
	// scope whose key was erased.
	ErrErased = errors.New("scope erased")
	// ErrStorageFull matches *StorageFullError: the disk or quota under
	// the store has no room for the write.
	ErrStorageFull = errors.New("storage full")
)

// FencedError refuses a write whose epoch is not the run's current lease
// epoch: stale, or from the future. The writer must stop; somebody else owns
// the run, or the caller invented authority it never acquired.
type FencedError struct {
	Run     RunID
	Held    Epoch // the epoch the caller presented
	Current Epoch // the epoch of the run's lease
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("run %s: fenced: epoch %d presented, lease is at epoch %d", e.Run, e.Held, e.Current)
}

// Unwrap returns ErrFenced, the error's class.
func (e *FencedError) Unwrap() error { return ErrFenced }

// LeaseHeldError refuses an acquire while a live lease exists, including one
// held by the caller itself: renewing is a different verb.
type LeaseHeldError struct {
	Run       RunID
	Owner     string
	Epoch     Epoch
	Remaining time.Duration
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("run %s: lease held by %q at epoch %d for another %s", e.Run, e.Owner, e.Epoch, e.Remaining)
}

// Unwrap returns ErrLeaseHeld, the error's class.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// LeaseNotHeldError refuses a renewal by anyone but the exact live holder.
// It means stop: the caller no longer owns the run.
type LeaseNotHeldError struct {
	Run   RunID
	Owner string
	Epoch Epoch
}

func (e *LeaseNotHeldError) Error() string {
	return fmt.Sprintf("run %s: lease not held by %q at epoch %d", e.Run, e.Owner, e.Epoch)
}

// Unwrap returns ErrLeaseNotHeld, the error's class.
func (e *LeaseNotHeldError) Unwrap() error { return ErrLeaseNotHeld }

// RunSealedError refuses an append to a sealed run, whatever the epoch: a
// sealed run is a leaf of the log and its history is frozen.
type RunSealedError struct {
	Run     RunID
	Outcome string
}

func (e *RunSealedError) Error() string {
	return fmt.Sprintf("run %s: sealed as %q; it accepts no more records", e.Run, e.Outcome)
}

// Unwrap returns ErrRunSealed, the error's class.
func (e *RunSealedError) Unwrap() error { return ErrRunSealed }

// DuplicateEffectError refuses a second EffectStarted for one effect key in
// one run: the exactly-once index fired.
type DuplicateEffectError struct {
	Run RunID
	Key Digest
}

func (e *DuplicateEffectError) Error() string {
	return fmt.Sprintf("run %s: effect %s already started", e.Run, e.Key)
}

// Unwrap returns ErrDuplicateEffect, the error's class.
func (e *DuplicateEffectError) Unwrap() error { return ErrDuplicateEffect }

// DuplicateAdmissionError refuses a RunAdmitted whose admission key this
// tenant already issued; Holder is the run that holds it.
type DuplicateAdmissionError struct {
	Key    string
	Holder RunID
}

func (e *DuplicateAdmissionError) Error() string {
	return fmt.Sprintf("admission key %q is already held by run %s", e.Key, e.Holder)
}

// Unwrap returns ErrDuplicateAdmission, the error's class.
func (e *DuplicateAdmissionError) Unwrap() error { return ErrDuplicateAdmission }

// RecordTooLargeError refuses a record over MaxRecordBytes. Records are never
// truncated: a truncated record is a different record.
type RecordTooLargeError struct {
	Bytes int
	Limit int
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("record is %d bytes, over the %d-byte limit", e.Bytes, e.Limit)
}

// Unwrap returns ErrRecordTooLarge, the error's class.
func (e *RecordTooLargeError) Unwrap() error { return ErrRecordTooLarge }

// CorruptError reports stored state that fails verification: a hash that
// does not cover its bytes, a broken link, a seq gap, an id that does not
// parse. It is never skipped or repaired.
type CorruptError struct {
	Run    RunID
	Seq    Seq
	Detail string
}

func (e *CorruptError) Error() string {
	switch {
	case e.Run.IsZero():
		return "corrupt journal: " + e.Detail
	case e.Seq == 0: // about the run, not one of its records
		return fmt.Sprintf("corrupt journal: run %s: %s", e.Run, e.Detail)
	}
	return fmt.Sprintf("corrupt journal: run %s seq %d: %s", e.Run, e.Seq, e.Detail)
}

// Unwrap returns ErrCorrupt, the error's class.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// CommitUnknownError means a COMMIT was sent and no acknowledgement came
// back. Treat the write as in doubt, never as aborted: it may have landed.
type CommitUnknownError struct {
	Detail string
	Err    error
}

func (e *CommitUnknownError) Error() string { return "commit outcome unknown: " + e.Detail }
func (e *CommitUnknownError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCommitUnknown, the error's class; Unwrap
// leads to the failure that left the outcome unknown.
func (e *CommitUnknownError) Is(target error) bool { return target == ErrCommitUnknown }

// StorageFullError refuses a write because the filesystem or quota under
// the store is full (ENOSPC, SQLITE_FULL, PostgreSQL's disk_full). Nothing
// of a refused write is kept unless it is also ErrCommitUnknown; the store
// takes writes again as soon as space is freed, without a restart.
type StorageFullError struct {
	Err error // the underlying failure
}

func (e *StorageFullError) Error() string {
	return fmt.Sprintf("storage full: the journal's filesystem has no space left; free space or grow it, and writes resume by themselves (%v)", e.Err)
}

// Unwrap returns ErrStorageFull, the error's class.
func (e *StorageFullError) Unwrap() error { return ErrStorageFull }

// NotFoundError reports a missing run, case or other entity.
type NotFoundError struct {
	What string
}

func (e *NotFoundError) Error() string { return e.What + " not found" }

// Unwrap returns ErrNotFound, the error's class.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// InvalidArgumentError refuses a value from outside, naming the field.
type InvalidArgumentError struct {
	Field  string
	Detail string
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Detail)
}

// Unwrap returns ErrInvalidArgument, the error's class.
func (e *InvalidArgumentError) Unwrap() error { return ErrInvalidArgument }

// ErasedError refuses an append whose fields would be sealed under an
// erased scope (a case, or a run without a case): its key is destroyed on
// purpose and never made again, and nothing is stored in the clear
// instead. The refusal is permanent for that case or run, as a seal is;
// the records already there still read, with their fields erased.
type ErasedError struct {
	Scope string // the erased key scope, "<tenant>/case/<case>" or "<tenant>/run/<run>"
	Run   RunID
	Case  CaseID // zero when the scope is the run's
	Err   error  // the key ring's refusal
}

func (e *ErasedError) Error() string {
	what := "run " + e.Run.String()
	if !e.Case.IsZero() {
		what = "case " + e.Case.String()
	}
	return fmt.Sprintf("%s is erased (scope %s): its key was destroyed, so no more of its data can be recorded", what, e.Scope)
}

// Unwrap returns the key ring's refusal.
func (e *ErasedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrErased, the error's class; Unwrap leads
// to the key ring's refusal.
func (e *ErasedError) Is(target error) bool { return target == ErrErased }

// ErrNotSupported is returned, wrapped, by a method a backend cannot answer.
// An unsupported method never answers with a silent empty result.
var ErrNotSupported = errors.New("not supported by this store")

// ErrClosed is returned by a store after Close.
var ErrClosed = errors.New("store is closed")

// IsDomain reports whether err is one of the refusals a store makes on
// purpose (as opposed to an I/O or backend failure). A group commit uses it
// to decide whether a failed member may share a transaction with others.
func IsDomain(err error) bool {
	for _, class := range domain {
		if errors.Is(err, class) {
			return true
		}
	}
	return false
}

// domain lists the classes of deliberate refusal.
var domain = []error{ErrFenced, ErrLeaseHeld, ErrLeaseNotHeld, ErrRunSealed, ErrDuplicateEffect,
	ErrDuplicateAdmission, ErrRecordTooLarge, ErrNotFound, ErrInvalidArgument, ErrErased}
