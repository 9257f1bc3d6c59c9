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
	var b [1 + 2*sha256.Size]byte
	b[0] = nodePrefix
	node := func(l, r *Hash) Hash {
		copy(b[1:], l[:])
		copy(b[1+sha256.Size:], r[:])
		return sha256.Sum256(b[:])
	}
	fn, sn := index, size-1
	r := LeafHash(leafValue)
	for i := range proofHashes {
		p := &proofHashes[i]
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			r = node(p, &r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = node(&r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	return sn == 0 && r == root
}
