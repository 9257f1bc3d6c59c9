package witness

import (
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// verifyConsistency checks an RFC 6962 consistency proof from (oldSize,
// oldRoot) to (newSize, newRoot), deciding size 0 and equal sizes itself.
//
// Interim: package log's VerifyConsistency replaces this once it lands on
// main; the cases decided here are the ones it decides.
func verifyConsistency(oldSize, newSize uint64, oldRoot, newRoot [32]byte, hashes [][32]byte) error {
	switch {
	case oldSize > newSize:
		return fmt.Errorf("old size %d is larger than new size %d", oldSize, newSize)
	case oldSize == 0:
		if len(hashes) != 0 {
			return fmt.Errorf("proof from size 0 must be empty, got %d hashes", len(hashes))
		}
		return nil
	case oldSize == newSize:
		if len(hashes) != 0 {
			return fmt.Errorf("proof between equal sizes must be empty, got %d hashes", len(hashes))
		}
		if oldRoot != newRoot {
			return fmt.Errorf("two roots for size %d", oldSize)
		}
		return nil
	}
	p := make([][]byte, len(hashes))
	for i := range hashes {
		p[i] = hashes[i][:]
	}
	return proof.VerifyConsistency(rfc6962.DefaultHasher, oldSize, newSize, p, oldRoot[:], newRoot[:])
}
