package log

import (
	"crypto/sha256"
	"testing"
)

// mth is RFC 9162's MTH over leaf hashes, by its recursive definition.
func mth(leaves []Hash) Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := mth(leaves[:k]), mth(leaves[k:])
	return sha256.Sum256(append(append([]byte{nodePrefix}, l[:]...), r[:]...))
}

// path is RFC 9162's PATH(m, D[n]), by its recursive definition.
func path(m int, leaves []Hash) []Hash {
	if len(leaves) == 1 {
		return nil
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	if m < k {
		return append(path(m, leaves[:k]), mth(leaves[k:]))
	}
	return append(path(m-k, leaves[k:]), mth(leaves[:k]))
}

// TestInclusionHolds_AgreesWithVerifyInclusion: for every leaf of every
// tree up to 33 leaves, the true proof and its forgeries (a hash changed,
// one dropped, one added, the proof reversed, another index or size, the
// leaf's neighbour) are accepted by InclusionHolds exactly when
// VerifyInclusion (transparency-dev/merkle's proof check) accepts them.
func TestInclusionHolds_AgreesWithVerifyInclusion(t *testing.T) {
	accepted := 0
	for size := 1; size <= 33; size++ {
		values := make([]Hash, size)
		leaves := make([]Hash, size)
		for i := range values {
			values[i] = sha256.Sum256([]byte{byte(i), byte(size)})
			leaves[i] = LeafHash(values[i])
		}
		root := mth(leaves)
		for idx := range size {
			p := path(idx, leaves)
			check := func(what string, v Hash, index, size uint64, proof []Hash) {
				t.Helper()
				want := VerifyInclusion(v, index, size, proof, root) == nil
				if got := InclusionHolds(v, index, size, proof, root); got != want {
					t.Fatalf("size %d leaf %d, %s: InclusionHolds says %v, VerifyInclusion %v", size, idx, what, got, want)
				}
				if want {
					accepted++
				}
			}
			check("the true proof", values[idx], uint64(idx), uint64(size), p)
			for i := range p {
				q := append([]Hash(nil), p...)
				q[i][i%32] ^= 1
				check("a hash changed", values[idx], uint64(idx), uint64(size), q)
				check("a hash dropped", values[idx], uint64(idx), uint64(size), append(append([]Hash(nil), p[:i]...), p[i+1:]...))
			}
			check("a hash added", values[idx], uint64(idx), uint64(size), append(append([]Hash(nil), p...), root))
			check("the last hash dropped", values[idx], uint64(idx), uint64(size), p[:max(len(p)-1, 0)])
			rev := append([]Hash(nil), p...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			check("the proof reversed", values[idx], uint64(idx), uint64(size), rev)
			for _, d := range []int{-2, -1, 1, 2} {
				if i := idx + d; i >= 0 {
					check("another index", values[idx], uint64(i), uint64(size), p)
				}
				if s := size + d; s >= 0 {
					check("another size", values[idx], uint64(idx), uint64(s), p)
				}
				if i := idx + d; i >= 0 && i < size {
					check("the neighbour's value", values[i], uint64(idx), uint64(size), p)
				}
			}
		}
	}
	if accepted < 33*34/2 {
		t.Fatalf("only %d proofs accepted: the true ones were not", accepted)
	}
}

// FuzzInclusionHolds: on any proof, InclusionHolds accepts exactly what
// VerifyInclusion accepts. The seeds are true proofs, so that the fuzzer
// starts from inputs that verify.
func FuzzInclusionHolds(f *testing.F) {
	leaves := make([]Hash, 13)
	values := make([]Hash, 13)
	for i := range leaves {
		values[i] = sha256.Sum256([]byte{byte(i)})
		leaves[i] = LeafHash(values[i])
	}
	root := mth(leaves)
	for _, idx := range []int{0, 5, 12} {
		var flat []byte
		for _, h := range path(idx, leaves) {
			flat = append(flat, h[:]...)
		}
		f.Add(values[idx][:], uint64(idx), uint64(13), flat, root[:])
	}
	f.Fuzz(func(t *testing.T, value []byte, index, size uint64, flat, root []byte) {
		var v, r Hash
		copy(v[:], value)
		copy(r[:], root)
		var proof []Hash
		for len(flat) >= 32 && len(proof) < 70 {
			proof = append(proof, Hash(flat[:32]))
			flat = flat[32:]
		}
		want := VerifyInclusion(v, index, size, proof, r) == nil
		if got := InclusionHolds(v, index, size, proof, r); got != want {
			t.Fatalf("index %d size %d, %d hashes: InclusionHolds says %v, VerifyInclusion %v", index, size, len(proof), got, want)
		}
	})
}
