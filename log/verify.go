package log

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
)

// sumHasher is the RFC 6962 SHA-256 hasher the verifiers hand to
// transparency-dev/merkle's proof checks. rfc6962.DefaultHasher allocates a
// SHA-256 state per node hashed (most of an auditor's garbage); this one
// hashes a stack buffer with sha256.Sum256, so only the 32-byte result is
// allocated. Same hashes: the tests compare it with rfc6962.DefaultHasher.
type sumHasher struct{}

var verifyHasher sumHasher

func (sumHasher) EmptyRoot() []byte { r := emptyRoot; return r[:] }

func (sumHasher) Size() int { return sha256.Size }

// HashLeaf is SHA-256(0x00 || leaf); the proof checks take leaf hashes and
// never call it, but the interface asks for it.
func (sumHasher) HashLeaf(leaf []byte) []byte {
	b := make([]byte, 1+len(leaf))
	b[0] = leafPrefix
	copy(b[1:], leaf)
	h := sha256.Sum256(b)
	return h[:]
}

// HashChildren is SHA-256(0x01 || l || r) through hashChildren's stack
// buffer; proof hashes are always 32 bytes (they come from a Hash).
func (sumHasher) HashChildren(l, r []byte) []byte { return hashChildren(l, r) }

// VerifyInclusion checks that proofHashes, an RFC 6962 audit path, shows the
// leaf with value leafValue at position index in the tree of the given size whose root is root. It returns
// nil only if the proof has exactly the RFC 6962 length for (index, size) and
// recomputes root; otherwise a [*VerifyError] matching [ErrProofInvalid].
//
// It takes the leaf value, not the leaf hash, so a caller cannot skip the
// leaf prefix and have an interior node accepted as a leaf. size and root
// must come from the same signed checkpoint: RFC 6962 does not bind the size
// into the root, so a proof can also verify at another size of the same
// shape.
func VerifyInclusion(leafValue Hash, index, size uint64, proofHashes []Hash, root Hash) error {
	const op = "VerifyInclusion"
	if index >= size {
		re := &RangeError{Op: op, Value: index, Bound: size,
			Detail: fmt.Sprintf("index %d out of range for tree size %d", index, size)}
		return &VerifyError{Op: op, Reason: re.Detail, Err: re}
	}
	lh := LeafHash(leafValue)
	err := proof.VerifyInclusion(verifyHasher, index, size, lh[:], toSlices(proofHashes), root[:])
	if err != nil {
		return libError(op, err)
	}
	return nil
}

// VerifyConsistency checks that proofHashes, an RFC 6962 consistency proof,
// shows the tree of oldSize with root oldRoot to be a prefix of the tree of newSize with root newRoot. It returns
// nil or a [*VerifyError] matching [ErrProofInvalid].
//
// The cases RFC 9162 leaves to the caller are decided here, not by the
// library (whose answer changed between versions): from size 0 the proof must
// be empty and oldRoot must be [EmptyRoot] (and newRoot too if newSize is 0);
// at equal sizes the proof must be empty and the roots equal, and two roots
// for one size are evidence of a fork. oldSize > newSize never verifies. As
// with [VerifyInclusion], each size must come from the checkpoint that
// carries its root.
func VerifyConsistency(oldSize, newSize uint64, oldRoot, newRoot Hash, proofHashes []Hash) error {
	const op = "VerifyConsistency"
	fail := func(format string, args ...any) error {
		return &VerifyError{Op: op, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case oldSize > newSize:
		re := &RangeError{Op: op, Value: oldSize, Bound: newSize,
			Detail: fmt.Sprintf("old size %d is larger than new size %d", oldSize, newSize)}
		return &VerifyError{Op: op, Reason: re.Detail, Err: re}
	case oldSize == 0:
		if len(proofHashes) != 0 {
			return fail("proof from size 0 must be empty, got %d hashes", len(proofHashes))
		}
		if oldRoot != emptyRoot {
			return fail("root %x given for size 0 is not the empty root", oldRoot)
		}
		if newSize == 0 && newRoot != emptyRoot {
			return fail("root %x given for size 0 is not the empty root", newRoot)
		}
		return nil
	case oldSize == newSize:
		if len(proofHashes) != 0 {
			return fail("proof between equal sizes must be empty, got %d hashes", len(proofHashes))
		}
		if oldRoot != newRoot {
			return fail("two different roots %x and %x for size %d", oldRoot, newRoot, oldSize)
		}
		return nil
	}
	err := proof.VerifyConsistency(verifyHasher, oldSize, newSize, toSlices(proofHashes), oldRoot[:], newRoot[:])
	if err != nil {
		return libError(op, err)
	}
	return nil
}

// libError turns a transparency-dev/merkle verification error into a
// VerifyError, with the root mismatch spelled in hex because the library
// prints the roots as decimal byte lists.
func libError(op string, err error) error {
	var rm proof.RootMismatchError
	if errors.As(err, &rm) {
		return &VerifyError{Op: op, Err: err,
			Reason: fmt.Sprintf("computed root %x does not match expected root %x", rm.CalculatedRoot, rm.ExpectedRoot)}
	}
	return &VerifyError{Op: op, Reason: err.Error(), Err: err}
}

func toSlices(hs []Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}
