package store

import (
	"errors"
	"fmt"
	"testing"
)

// TestErrorClasses: every typed error matches its own class and no other,
// through any wrapping, so one errors.Is switch maps them (to HTTP statuses,
// exit codes); errors.As still reaches the data.
func TestErrorClasses(t *testing.T) {
	classes := []error{ErrFenced, ErrLeaseHeld, ErrLeaseNotHeld, ErrRunSealed, ErrDuplicateEffect, ErrDuplicateAdmission,
		ErrRecordTooLarge, ErrCorrupt, ErrCommitUnknown, ErrNotFound, ErrInvalidArgument, ErrNotSupported, ErrClosed, ErrErased}
	io := errors.New("connection reset")
	tests := []struct {
		err    error
		class  error
		domain bool
	}{
		{&FencedError{Held: 1, Current: 2}, ErrFenced, true},
		{&LeaseHeldError{Owner: "a"}, ErrLeaseHeld, true},
		{&LeaseNotHeldError{Owner: "a"}, ErrLeaseNotHeld, true},
		{&RunSealedError{Outcome: "succeeded"}, ErrRunSealed, true},
		{&DuplicateEffectError{}, ErrDuplicateEffect, true},
		{&DuplicateAdmissionError{Key: "k"}, ErrDuplicateAdmission, true},
		{&RecordTooLargeError{Bytes: 2, Limit: 1}, ErrRecordTooLarge, true},
		{&CorruptError{Detail: "x"}, ErrCorrupt, false},
		{&CommitUnknownError{Detail: "x", Err: io}, ErrCommitUnknown, false},
		{&NotFoundError{What: "run"}, ErrNotFound, true},
		{&InvalidArgumentError{Field: "f"}, ErrInvalidArgument, true},
		{&ErasedError{Scope: "default/case/x", Err: io}, ErrErased, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T", tt.err), func(t *testing.T) {
			wrapped := fmt.Errorf("op: %w", tt.err)
			for _, c := range classes {
				if got := errors.Is(wrapped, c); got != (c == tt.class) {
					t.Errorf("errors.Is(%T, %v) = %v", tt.err, c, got)
				}
			}
			if got := IsDomain(wrapped); got != tt.domain {
				t.Errorf("IsDomain(%T) = %v, want %v", tt.err, got, tt.domain)
			}
		})
	}
	if !errors.Is(&CommitUnknownError{Err: io}, io) {
		t.Error("CommitUnknownError no longer unwraps to its cause")
	}
	if IsDomain(io) || IsDomain(nil) {
		t.Error("IsDomain of an I/O error or nil")
	}
}
