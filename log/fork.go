package log

import (
	"bytes"
	"errors"

	"github.com/transparency-dev/merkle/proof"
)

// ForkRoot reports whether a consistency proof that fails to verify still
// proves the log inconsistent, and returns the other root of oldSize it
// proves. RFC 9162 verification computes both roots from the proof; when
// the root it computes for newSize is newRoot, the proof's hashes are that
// tree's own nodes (no others would hash to it), so the root it computes for
// oldSize is the root of that tree's first oldSize leaves. If that is not
// oldRoot, the log signed two checkpoints that cannot both be true, and the
// proof shows it to anyone. A proof that verifies, or that does not
// reproduce newRoot, proves no fork.
func ForkRoot(oldSize, newSize uint64, oldRoot, newRoot Hash, proofHashes []Hash) (Hash, bool) {
	verr := VerifyConsistency(oldSize, newSize, oldRoot, newRoot, proofHashes)
	var rm proof.RootMismatchError
	if verr == nil || !errors.As(verr, &rm) || !bytes.Equal(rm.ExpectedRoot, oldRoot[:]) || len(rm.CalculatedRoot) != len(oldRoot) {
		return Hash{}, false
	}
	alt := Hash(rm.CalculatedRoot)
	return alt, alt != oldRoot && VerifyConsistency(oldSize, newSize, alt, newRoot, proofHashes) == nil
}
