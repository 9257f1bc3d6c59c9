package log

import "crypto/sha256"

// InclusionHolds reports whether proofHashes proves leafValue to be the
// leaf at index of the tree of size with root: what VerifyInclusion
// accepts, computed by RFC 9162 section 2.1.3.2 without allocating. A
// caller checking many proofs (the auditor, one per sealed run) asks
// VerifyInclusion for the error only when this says no; the two agree on
// every input (TestInclusionHolds_AgreesWithVerifyInclusion,
// FuzzInclusionHolds).
func InclusionHolds(leafValue Hash, index, size uint64, proofHashes []Hash, root Hash) bool {
	if index >= size {
		return false
	}
	p := NewInclusionPath(leafValue, index, size)
	for i := range proofHashes {
		if !p.Step(&proofHashes[i]) {
			return false
		}
	}
	return p.AtRoot() && p.Hash == root
}

// InclusionPath is the state of RFC 9162 section 2.1.3.2's computation
// of a root from an inclusion proof, between two proof hashes: the node
// reached so far, its position Index at its level, and the position Last
// of the tree's last node at that level. It lets a caller checking many
// proofs of one tree see where their paths meet (disclosure's memo of
// neighbouring runs' proofs) while the steps themselves stay the ones
// InclusionHolds takes.
type InclusionPath struct {
	Index, Last uint64
	Hash        Hash
}

// NewInclusionPath starts the path of leaf index, whose value is
// leafValue, in a tree of size leaves. index must be below size.
func NewInclusionPath(leafValue Hash, index, size uint64) InclusionPath {
	return InclusionPath{Index: index, Last: size - 1, Hash: LeafHash(leafValue)}
}

// Step combines the node reached so far with the next proof hash h and
// moves up. It reports false, leaving the path as it was, when the path
// is already at the root, where a proof has no more hashes to give.
func (p *InclusionPath) Step(h *Hash) bool {
	if p.Last == 0 {
		return false
	}
	var b [1 + 2*sha256.Size]byte
	b[0] = nodePrefix
	if p.Index&1 == 1 || p.Index == p.Last {
		copy(b[1:], h[:])
		copy(b[1+sha256.Size:], p.Hash[:])
		for p.Index&1 == 0 && p.Index != 0 {
			p.Index, p.Last = p.Index>>1, p.Last>>1
		}
	} else {
		copy(b[1:], p.Hash[:])
		copy(b[1+sha256.Size:], h[:])
	}
	p.Hash = sha256.Sum256(b[:])
	p.Index, p.Last = p.Index>>1, p.Last>>1
	return true
}

// AtRoot reports whether the path has reached the tree's root level.
func (p *InclusionPath) AtRoot() bool { return p.Last == 0 }
