package log

import (
	"context"
	"testing"
)

// FuzzProofsAnySize: for any index and sizes, the proofs of a consistent tree
// verify against its roots, and nothing panics. The constant tree stands in
// for a store of any size up to 2^64-1.
func FuzzProofsAnySize(f *testing.F) {
	const max = ^uint64(0)
	for _, s := range [][3]uint64{{0, 0, 1}, {0, 1, 1}, {5, 6, 7}, {1<<63 - 1, 1 << 63, max}, {max - 1, max - 1, max}, {max, max, max}, {0, max, 0}} {
		f.Add(s[0], s[1], s[2])
	}
	ctx := context.Background()
	c := newConstTree(leafValue(42))
	f.Fuzz(func(t *testing.T, index, oldSize, size uint64) {
		root, err := Root(ctx, c, size)
		if err != nil {
			t.Fatalf("Root(%d): %v", size, err)
		}
		p, err := InclusionProof(ctx, c, index, size)
		if index >= size {
			if err == nil {
				t.Fatalf("InclusionProof(%d, %d) accepted", index, size)
			}
		} else if err != nil {
			t.Fatalf("InclusionProof(%d, %d): %v", index, size, err)
		} else if err := VerifyInclusion(c.value, index, size, p, root); err != nil {
			t.Fatalf("VerifyInclusion(%d, %d): %v", index, size, err)
		}

		oldRoot, err := Root(ctx, c, oldSize)
		if err != nil {
			t.Fatalf("Root(%d): %v", oldSize, err)
		}
		p, err = ConsistencyProof(ctx, c, oldSize, size)
		if oldSize > size {
			if err == nil {
				t.Fatalf("ConsistencyProof(%d, %d) accepted", oldSize, size)
			}
			return
		}
		if err != nil {
			t.Fatalf("ConsistencyProof(%d, %d): %v", oldSize, size, err)
		}
		if err := VerifyConsistency(oldSize, size, oldRoot, root, p); err != nil {
			t.Fatalf("VerifyConsistency(%d, %d): %v", oldSize, size, err)
		}
	})
}

// FuzzVerifiers feeds arbitrary proofs to the verifiers: they must not panic,
// and must not accept a proof for the constant tree's root unless it is the
// genuine one.
func FuzzVerifiers(f *testing.F) {
	f.Add(uint64(0), uint64(1), uint64(3), []byte{})
	f.Add(uint64(2), uint64(5), uint64(9), make([]byte, 96))
	f.Add(^uint64(0)-1, ^uint64(0), ^uint64(0), make([]byte, 64*32))
	ctx := context.Background()
	c := newConstTree(leafValue(43))
	f.Fuzz(func(t *testing.T, index, oldSize, size uint64, raw []byte) {
		var p []Hash
		for len(raw) >= 32 {
			p = append(p, Hash(raw[:32]))
			raw = raw[32:]
		}
		root, _ := Root(ctx, c, size)
		oldRoot, _ := Root(ctx, c, oldSize)
		if VerifyInclusion(c.value, index, size, p, root) == nil {
			if want, err := InclusionProof(ctx, c, index, size); err != nil || !equalProofs(p, want) {
				t.Fatalf("VerifyInclusion(%d, %d) accepted a proof that is not the tree's", index, size)
			}
		}
		if VerifyConsistency(oldSize, size, oldRoot, root, p) == nil {
			if want, err := ConsistencyProof(ctx, c, oldSize, size); err != nil || !equalProofs(p, want) {
				t.Fatalf("VerifyConsistency(%d, %d) accepted a proof that is not the tree's", oldSize, size)
			}
		}
	})
}

func equalProofs(a, b []Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
