package monitor

import (
	"errors"
	"fmt"
)

// Sentinel errors: each error the package returns wraps exactly one.
var (
	// ErrLocked reports a state directory another Follower holds.
	ErrLocked = errors.New("monitor: state directory in use")

	// ErrBadState reports a saved checkpoint that cannot be used: it
	// cannot be read, or it no longer verifies with the keys and policy
	// given. The error is a *StateError.
	ErrBadState = errors.New("monitor: saved state unusable")

	// ErrFork reports that the log signed two checkpoints that cannot
	// both be true. Follower.Run returns it as a *ForkError.
	ErrFork = errors.New("monitor: the log forked")

	// ErrNoOlderCheckpoint reports a source that cannot serve the
	// checkpoint the log signed at an older size (a tiles layout publishes
	// only its newest one).
	ErrNoOlderCheckpoint = errors.New("monitor: the source serves only its newest checkpoint")

	// ErrNotServed reports a consistency proof asked of a TilesSource for a
	// size that is not the checkpoint it served last: there is no signed
	// root to authenticate its tiles against.
	ErrNotServed = errors.New("monitor: not the checkpoint the source serves")
)

// A StateError says why the saved checkpoint at Path cannot be used. It
// unwraps to ErrBadState; Err, when set, is the cause (an I/O error).
type StateError struct {
	Path   string
	Reason string
	Err    error
}

func (e *StateError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("%s %s", e.Path, e.Reason)
}

// Is matches ErrBadState.
func (e *StateError) Is(target error) bool { return target == ErrBadState }

// Unwrap returns the cause.
func (e *StateError) Unwrap() error { return e.Err }

// A ForkError is the fork a Follower found: its Result names the evidence
// file. It unwraps to ErrFork.
type ForkError struct {
	Result Result
}

func (e *ForkError) Error() string { return e.Result.Message }

// Unwrap returns ErrFork.
func (e *ForkError) Unwrap() error { return ErrFork }
