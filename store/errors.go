package store

import (
	"errors"
	"fmt"
	"time"
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

// RunSealedError refuses an append to a sealed run, whatever the epoch: a
// sealed run is a leaf of the log and its history is frozen.
type RunSealedError struct {
	Run     RunID
	Outcome string
}

func (e *RunSealedError) Error() string {
	return fmt.Sprintf("run %s: sealed as %q; it accepts no more records", e.Run, e.Outcome)
}

// DuplicateEffectError refuses a second EffectStarted for one effect key in
// one run: the exactly-once index fired.
type DuplicateEffectError struct {
	Run RunID
	Key Digest
}

func (e *DuplicateEffectError) Error() string {
	return fmt.Sprintf("run %s: effect %s already started", e.Run, e.Key)
}

// DuplicateAdmissionError refuses a RunAdmitted whose admission key this
// tenant already issued; Holder is the run that holds it.
type DuplicateAdmissionError struct {
	Key    string
	Holder RunID
}

func (e *DuplicateAdmissionError) Error() string {
	return fmt.Sprintf("admission key %q is already held by run %s", e.Key, e.Holder)
}

// RecordTooLargeError refuses a record over MaxRecordBytes. Records are never
// truncated: a truncated record is a different record.
type RecordTooLargeError struct {
	Bytes int
	Limit int
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("record is %d bytes, over the %d-byte limit", e.Bytes, e.Limit)
}

// CorruptError reports stored state that fails verification: a hash that
// does not cover its bytes, a broken link, a seq gap, an id that does not
// parse. It is never skipped or repaired.
type CorruptError struct {
	Run    RunID
	Seq    Seq
	Detail string
}

func (e *CorruptError) Error() string {
	if e.Run.IsZero() {
		return "corrupt journal: " + e.Detail
	}
	return fmt.Sprintf("corrupt journal: run %s seq %d: %s", e.Run, e.Seq, e.Detail)
}

// CommitUnknownError means a COMMIT was sent and no acknowledgement came
// back. Treat the write as in doubt, never as aborted: it may have landed.
type CommitUnknownError struct {
	Detail string
	Err    error
}

func (e *CommitUnknownError) Error() string { return "commit outcome unknown: " + e.Detail }
func (e *CommitUnknownError) Unwrap() error { return e.Err }

// NotFoundError reports a missing run, case or other entity.
type NotFoundError struct {
	What string
}

func (e *NotFoundError) Error() string { return e.What + " not found" }

// InvalidArgumentError refuses a value from outside, naming the field.
type InvalidArgumentError struct {
	Field  string
	Detail string
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Detail)
}

// ErrNotSupported is returned, wrapped, by a method a backend cannot answer.
// An unsupported method never answers with a silent empty result.
var ErrNotSupported = errors.New("not supported by this store")

// ErrClosed is returned by a store after Close.
var ErrClosed = errors.New("store is closed")

// IsDomain reports whether err is one of the refusals a store makes on
// purpose (as opposed to an I/O or backend failure). A group commit uses it
// to decide whether a failed member may share a transaction with others.
func IsDomain(err error) bool {
	var (
		f  *FencedError
		lh *LeaseHeldError
		ln *LeaseNotHeldError
		rs *RunSealedError
		de *DuplicateEffectError
		da *DuplicateAdmissionError
		tl *RecordTooLargeError
		nf *NotFoundError
		ia *InvalidArgumentError
	)
	return errors.As(err, &f) || errors.As(err, &lh) || errors.As(err, &ln) ||
		errors.As(err, &rs) || errors.As(err, &de) || errors.As(err, &da) ||
		errors.As(err, &tl) || errors.As(err, &nf) || errors.As(err, &ia)
}
