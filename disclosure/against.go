package disclosure

import (
	"context"
	"errors"
	"fmt"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
)

// ErrNoCheckpoint reports a journal that keeps no signed checkpoint to
// disclose against.
var ErrNoCheckpoint = errors.New("the journal keeps no signed checkpoint")

// ErrCheckpointPolicy is matched by a *CheckpointPolicyError.
var ErrCheckpointPolicy = errors.New("the checkpoint does not meet the log key and witness policy")

// A CheckpointPolicyError refuses a checkpoint to disclose against: it is
// not signed by the log's key, or its cosignatures do not meet the witness
// policy. Err is checkpoint's error.
type CheckpointPolicyError struct {
	Err error
}

func (e *CheckpointPolicyError) Error() string {
	return fmt.Sprintf("%v: %v", ErrCheckpointPolicy, e.Err)
}

// Is matches ErrCheckpointPolicy.
func (e *CheckpointPolicyError) Is(target error) bool { return target == ErrCheckpointPolicy }

// Unwrap returns checkpoint's error.
func (e *CheckpointPolicyError) Unwrap() error { return e.Err }

// CheckpointReader is what LatestNote reads: the journal's newest signed
// checkpoint (store.CheckpointStore's LatestCheckpoint).
type CheckpointReader interface {
	LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error)
}

// witnessedReader is the part of store.PublicationStore LatestNote uses.
type witnessedReader interface {
	LatestWitnessed(ctx context.Context) (*store.SignedCheckpoint, error)
}

// LatestNote returns the signed checkpoint note a disclosure is made
// against when none is given: the newest one the publisher saw witnessed,
// when j also keeps publications (store.PublicationStore), else the newest
// signed one, which may carry no cosignature: VerifyAgainst judges it.
// A journal with neither is ErrNoCheckpoint.
func LatestNote(ctx context.Context, j CheckpointReader) ([]byte, error) {
	var sc *store.SignedCheckpoint
	var err error
	if ws, ok := j.(witnessedReader); ok {
		if sc, err = ws.LatestWitnessed(ctx); err != nil {
			return nil, err
		}
	}
	if sc == nil {
		if sc, err = j.LatestCheckpoint(ctx); err != nil {
			return nil, err
		}
	}
	if sc == nil {
		return nil, ErrNoCheckpoint
	}
	return sc.Note, nil
}

// VerifyAgainst opens the checkpoint note n to disclose against: it must
// carry a valid signature by the log's verifier key logVKey (a key the
// policy's log lines also name is one key, see MergeLogKeys) and meet the
// witness policy. A policy is required: there is no default, so a
// forgotten policy never means "no witness needed" (a "quorum none" policy
// says so on purpose). A checkpoint that fails is a *CheckpointPolicyError;
// keys that conflict are MergeLogKeys' error.
func VerifyAgainst(n []byte, logVKey string, policy *checkpoint.Policy) (*checkpoint.Signed, error) {
	if policy == nil {
		return nil, errors.New("disclosure: a witness policy is required")
	}
	logs, err := MergeLogKeys([]string{logVKey}, policy)
	if err != nil {
		return nil, err
	}
	signed, err := policy.Verify(n, logs...)
	if err != nil {
		return nil, &CheckpointPolicyError{Err: err}
	}
	return signed, nil
}
