package log

import (
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
)

// ErrProofInvalid is matched (with [errors.Is]) by every error a verifier
// returns, so a caller can tell "this proof does not verify" from anything
// else with one check. Every *VerifyError matches it.
var ErrProofInvalid = errors.New("proof invalid")

// ErrNodeNotFound is matched by a [*NodeNotFoundError]. A node store should
// return (or wrap) a *NodeNotFoundError for an absent node, so that callers can
// tell a tree size beyond what the store holds from an I/O failure.
var ErrNodeNotFound = errors.New("node not found")

// ErrNodeConflict is matched by a [*NodeConflictError]: an attempt to replace
// a stored node with a different hash, which in an append-only tree can only
// mean the caller appended at the wrong size or the store is corrupt.
var ErrNodeConflict = errors.New("node conflict")

// RangeError reports an index or size that is out of range for the operation:
// an index at or beyond the tree size, an old size beyond the new size, or an
// append that would take the tree past 2^64-1 leaves. It is a caller error,
// not a store failure, so callers branch on it (with [errors.As]) to answer
// "bad request" rather than "internal error".
type RangeError struct {
	Op     string // the function that refused, e.g. "InclusionProof"
	Value  uint64 // the index, old size or leaf count that was refused
	Bound  uint64 // the size or capacity it was checked against
	Detail string // the broken rule in words, with the values
}

// Error names the refusing function so a log line says which call was wrong.
func (e *RangeError) Error() string {
	return "log: " + e.Op + ": " + e.Detail
}

// VerifyError reports that a proof does not verify, and why. It matches
// [ErrProofInvalid], and unwraps to its cause when there is one (a
// [*RangeError] for impossible indexes or sizes, or the underlying library's
// error), so that an auditor can report the reason as well as the verdict.
type VerifyError struct {
	Op     string // the verifier, e.g. "VerifyInclusion"
	Reason string // what did not hold
	Err    error  // the cause, if any; may be nil
}

// Error leads with the verifier and the verdict, then the reason, so a
// report reads "not verified, because ...".
func (e *VerifyError) Error() string {
	return "log: " + e.Op + ": " + ErrProofInvalid.Error() + ": " + e.Reason
}

// Unwrap returns ErrProofInvalid and the cause, so that both errors.Is(err,
// ErrProofInvalid) and errors.As on the cause work.
func (e *VerifyError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrProofInvalid}
	}
	return []error{ErrProofInvalid, e.Err}
}

// NodeNotFoundError names a node the store does not hold. It matches
// [ErrNodeNotFound].
type NodeNotFoundError struct {
	ID compact.NodeID
}

// Error names the node, which tells an operator which size or index was
// beyond the store.
func (e *NodeNotFoundError) Error() string {
	return fmt.Sprintf("log: node (level %d, index %d) not found", e.ID.Level, e.ID.Index)
}

// Is reports whether target is ErrNodeNotFound.
func (e *NodeNotFoundError) Is(target error) bool { return target == ErrNodeNotFound }

// NodeConflictError names a node that a write would have changed. It matches
// [ErrNodeConflict].
type NodeConflictError struct {
	ID      compact.NodeID
	Stored  Hash // the hash already in the store
	Written Hash // the different hash the write carried
}

// Error shows both hashes, since a conflict is evidence worth keeping.
func (e *NodeConflictError) Error() string {
	return fmt.Sprintf("log: node (level %d, index %d) already stored with hash %x, refusing %x",
		e.ID.Level, e.ID.Index, e.Stored, e.Written)
}

// Is reports whether target is ErrNodeConflict.
func (e *NodeConflictError) Is(target error) bool { return target == ErrNodeConflict }
