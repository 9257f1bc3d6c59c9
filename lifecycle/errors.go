package lifecycle

import (
	"errors"
	"fmt"
)

// Kind classifies an [Error] by what the caller should do about it. Callers
// branch on the kind (errors.Is with the Err* sentinels, or [KindOf]); the
// message is for people.
type Kind uint8

// The kinds. The zero Kind is not a valid kind: [KindOf] returns it for a
// nil error or one that did not come from this package.
const (
	// KindNotFound: the study, trial, outbox record or effect does not exist.
	KindNotFound Kind = iota + 1
	// KindLeaseLost: the caller's trial owner token or finalization token is
	// not the exact current one (stale, released, from the future, or the
	// trial is no longer running). Nothing was written. The caller must stop
	// acting as owner.
	KindLeaseLost
	// KindConflict: the request contradicts durable state: a skipped outbox
	// phase, an effect replayed with a different payload, a contended
	// finalization acquire, a foreign or inconsistent cursor, an attempt to
	// change an immutable value. Nothing was written.
	KindConflict
	// KindIncompatible: a state blob's kind or version differs from the one
	// already stored in that scope. Nothing was written.
	KindIncompatible
	// KindResourceLimit: a limit is zero, unrepresentable or too small for
	// one item, or a payload exceeds MaxPayloadBytes. Nothing was written.
	KindResourceLimit
	// KindUnsupported: the backend lacks the capability, or the trial is not
	// lifecycle-managed. Callers must fail closed rather than emulate the
	// operation from weaker primitives.
	KindUnsupported
	// KindStorage: the backend failed, or the context ended. For a backend
	// that does I/O the outcome of a write may be unknown; re-read before
	// retrying a non-idempotent operation.
	KindStorage
	// KindInvalid: the request is malformed (empty owner, wrong number of
	// objective values, non-finite number, unknown phase...). Nothing was
	// written. Retrying the same request cannot succeed.
	KindInvalid
)

var kindNames = [...]string{
	KindNotFound:      "not found",
	KindLeaseLost:     "lease lost",
	KindConflict:      "conflict",
	KindIncompatible:  "incompatible state",
	KindResourceLimit: "resource limit",
	KindUnsupported:   "unsupported",
	KindStorage:       "storage failure",
	KindInvalid:       "invalid request",
}

// String returns the kind's name as it appears in error messages.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Error is the error every lifecycle operation returns. Op names the
// operation ("claim", "fail_stale", ...), Detail says what was wrong, and
// Err, when set, is the underlying cause (a backend or context error), which
// errors.Is and errors.As can reach.
type Error struct {
	Kind   Kind
	Op     string
	Detail string
	Err    error
}

// Error formats the error as "lifecycle: op: kind: detail: cause".
func (e *Error) Error() string {
	s := "lifecycle: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += e.Kind.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying cause, so that errors.Is(err,
// context.Canceled) holds for a cancelled operation.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's kind, which lets callers
// write errors.Is(err, lifecycle.ErrLeaseLost) for any wrapped error of that
// kind.
func (e *Error) Is(target error) bool {
	return e.Kind != 0 && int(e.Kind) < len(sentinels) && target == sentinels[e.Kind]
}

// Sentinels for errors.Is. Every *Error of a kind matches its sentinel.
var (
	ErrNotFound      error = &Error{Kind: KindNotFound}
	ErrLeaseLost     error = &Error{Kind: KindLeaseLost}
	ErrConflict      error = &Error{Kind: KindConflict}
	ErrIncompatible  error = &Error{Kind: KindIncompatible}
	ErrResourceLimit error = &Error{Kind: KindResourceLimit}
	ErrUnsupported   error = &Error{Kind: KindUnsupported}
	ErrStorage       error = &Error{Kind: KindStorage}
	ErrInvalid       error = &Error{Kind: KindInvalid}
)

var sentinels = [...]error{
	KindNotFound:      ErrNotFound,
	KindLeaseLost:     ErrLeaseLost,
	KindConflict:      ErrConflict,
	KindIncompatible:  ErrIncompatible,
	KindResourceLimit: ErrResourceLimit,
	KindUnsupported:   ErrUnsupported,
	KindStorage:       ErrStorage,
	KindInvalid:       ErrInvalid,
}

// KindOf returns the kind of the first *Error in err's chain, or 0 when
// there is none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// NewError returns an *Error of kind k for operation op. Backends use it so
// that every implementation reports the same shape.
func NewError(k Kind, op, format string, args ...any) *Error {
	return &Error{Kind: k, Op: op, Detail: fmt.Sprintf(format, args...)}
}

// StorageError wraps a backend failure (or a context error) as KindStorage.
func StorageError(op string, cause error) *Error {
	return &Error{Kind: KindStorage, Op: op, Err: cause}
}

// withOp returns err with Op set when it is an *Error without one; request
// validation produces errors before it knows which operation asked.
func withOp(op string, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Op == "" {
		c := *e
		c.Op = op
		return &c
	}
	return err
}
