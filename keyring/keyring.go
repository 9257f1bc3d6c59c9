// Package keyring keeps the scope keys that payload sealing (package
// store/sealed) wraps its data keys under, apart from the journal.
//
// A scope key never leaves its ring: the ring wraps a fresh data key for a
// scope and unwraps it again. Erasing a scope destroys its key, which makes
// every copy of every payload sealed under it unreadable at once, backups
// included; the ring remembers that the scope was erased (a tombstone), so
// a second erasure says so and a read reports "erased" rather than
// "unknown".
//
// Invariants every ring keeps:
//   - a scope's key is created on its first Wrap and destroyed only by Erase;
//   - an erased scope never gets a key again (Wrap is ErrErased);
//   - Unwrap distinguishes an erased scope (ErrErased), a scope the ring
//     never had (ErrUnknownScope) and wrapped bytes that do not open under
//     the scope's key (ErrUnwrap).
package keyring

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// DataKeySize is the size of a data key and of a file ring's scope key.
const DataKeySize = 32

// The classes of key ring failure a caller branches on.
var (
	// ErrErased: the scope's key was destroyed on purpose.
	ErrErased = errors.New("scope erased")
	// ErrUnknownScope: the ring has never had a key for the scope.
	ErrUnknownScope = errors.New("unknown scope")
	// ErrUnwrap: wrapped bytes do not open under the scope's key (damaged,
	// or wrapped for another scope).
	ErrUnwrap = errors.New("data key does not unwrap")
	// ErrInvalidScope: a scope name outside the grammar.
	ErrInvalidScope = errors.New("invalid scope name")
)

// ScopeError is a ring failure for one scope; it unwraps to its class.
type ScopeError struct {
	Scope string
	Err   error
}

func (e *ScopeError) Error() string { return fmt.Sprintf("key ring: scope %s: %v", e.Scope, e.Err) }
func (e *ScopeError) Unwrap() error { return e.Err }

// Ring is what sealing needs of a key ring.
type Ring interface {
	// Wrap returns a fresh data key and that key wrapped under scope's key,
	// creating the scope key on first use. An erased scope is ErrErased.
	Wrap(ctx context.Context, scope string) (key, wrapped []byte, err error)
	// Unwrap returns the data key wrapped under scope's key.
	Unwrap(ctx context.Context, scope string, wrapped []byte) ([]byte, error)
	// Erase destroys scope's key and keeps a tombstone. It reports false,
	// with no error, when the scope was already erased; a scope the ring
	// never had is ErrUnknownScope.
	Erase(ctx context.Context, scope string) (bool, error)
	// Erased reports whether scope's key was erased (its tombstone is
	// kept), from the ring's state alone: no key is read or unwrapped, so
	// a reader that shows which fields are erased need open none. A scope
	// the ring holds a key for is false; one it never had is
	// ErrUnknownScope.
	Erased(ctx context.Context, scope string) (bool, error)
	// Scopes lists the scopes the ring holds keys or tombstones for, sorted.
	Scopes(ctx context.Context) ([]Scope, error)
}

// Scope is a listed scope and whether it is erased.
type Scope struct {
	Name   string `json:"name"`
	Erased bool   `json:"erased"`
}

// ValidateScope checks a scope name: one to four "/"-separated segments of
// [A-Za-z0-9._-], none "." or "..", at most 200 bytes. Sealing names scopes
// "<tenant>/case/<ULID>" and "<tenant>/run/<ULID>".
func ValidateScope(s string) error {
	if s == "" || len(s) > 200 {
		return &ScopeError{Scope: short(s), Err: fmt.Errorf("%w: must be 1 to 200 bytes", ErrInvalidScope)}
	}
	segs := strings.Split(s, "/")
	if len(segs) > 4 {
		return &ScopeError{Scope: short(s), Err: fmt.Errorf("%w: more than 4 segments", ErrInvalidScope)}
	}
	for _, seg := range segs {
		if seg == "" || seg == "." || seg == ".." {
			return &ScopeError{Scope: short(s), Err: fmt.Errorf("%w: empty, \".\" or \"..\" segment", ErrInvalidScope)}
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return &ScopeError{Scope: short(s), Err: fmt.Errorf("%w: character %q outside [A-Za-z0-9._-]", ErrInvalidScope, c)}
			}
		}
	}
	return nil
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
