package publish

import (
	"errors"
	"fmt"
)

// Sentinel errors: one for each class of failure a caller or an operator
// branches on. The errors that carry data are typed (*AheadError,
// *RollbackError) and unwrap to their sentinel, so errors.Is finds the
// class and errors.As the details. Errors from a witness are those of
// package witness (witness.ErrConflict, witness.ErrRateLimited, ...),
// wrapped.
var (
	// ErrNoWitnesses: no witness of the policy has a URL to publish to,
	// yet the policy needs cosignatures.
	ErrNoWitnesses = errors.New("publish: no witness to publish to")
	// ErrWitnessAhead: a witness says it cosigned a size larger than the
	// log has ever had. It saw a different log under our origin (a fork,
	// or a stolen key): nothing is sent to it, and it is an alarm.
	ErrWitnessAhead = errors.New("witness reports a size larger than the log: it saw a different log")
	// ErrWitnessRolledBack: a witness reports a size below the largest it
	// already cosigned for this log: it lost or rolled back its state, so
	// it would cosign a fork of what it cosigned before. An alarm; the
	// publisher still proves from the size it reports.
	ErrWitnessRolledBack = errors.New("witness reports a size below one it cosigned for us: it lost or rolled back its state")
	// ErrSuperseded: the witness already holds a newer checkpoint of ours
	// than the one queued for it; only a newer one can be cosigned.
	ErrSuperseded = errors.New("witness holds a newer checkpoint than the queued one")
	// ErrBadCosignature: a witness answered 200 without a valid
	// cosignature by its key on the checkpoint sent. Nothing is kept.
	ErrBadCosignature = errors.New("witness answered without a valid cosignature")
	// ErrNoCheckpoint: the signed checkpoint of a queued size is not kept,
	// or does not verify with the log's key.
	ErrNoCheckpoint = errors.New("no valid signed checkpoint is kept for the queued size")
	// ErrWitnessMoving: the witness's size changed on every re-proof of one
	// attempt; someone else publishes to it too. The next attempt retries.
	ErrWitnessMoving = errors.New("witness kept changing size")
)

// An AheadError is a witness at a size beyond the whole log.
type AheadError struct {
	Witness     string // the witness's name in the policy
	WitnessSize uint64 // the size it says it cosigned
	LogSize     uint64 // the log's size
}

func (e *AheadError) Error() string {
	return fmt.Sprintf("%v: %s is at %d, the log at %d", ErrWitnessAhead, e.Witness, e.WitnessSize, e.LogSize)
}

// Unwrap returns ErrWitnessAhead.
func (e *AheadError) Unwrap() error { return ErrWitnessAhead }

// A RollbackError is a witness that reported a size below the largest it
// cosigned for this log.
type RollbackError struct {
	Witness  string // the witness's name in the policy
	Reported uint64 // the size it reports now (its 409)
	Cosigned uint64 // the largest size it cosigned for us, as kept
}

func (e *RollbackError) Error() string {
	return fmt.Sprintf("%v: %s reports size %d, but cosigned %d", ErrWitnessRolledBack, e.Witness, e.Reported, e.Cosigned)
}

// Unwrap returns ErrWitnessRolledBack.
func (e *RollbackError) Unwrap() error { return ErrWitnessRolledBack }
