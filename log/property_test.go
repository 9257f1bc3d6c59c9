package log

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyHistories appends random batches of random leaves, remembers the
// root each append returned, and checks that every pair of sizes along the
// history is provably consistent, every leaf provably included at every later
// size, and that a history which forks from it is caught.
func TestPropertyHistories(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		batches := rapid.SliceOfN(rapid.IntRange(0, 9), 1, 10).Draw(t, "batches")
		value := func(history byte, i int) Hash {
			var b [17]byte
			binary.BigEndian.PutUint64(b[:], seed)
			binary.BigEndian.PutUint64(b[8:], uint64(i))
			b[16] = history
			return sha256.Sum256(b[:])
		}

		grow := func(history byte, forkAt int) (*MemStore, []Hash, []Hash) {
			s := &MemStore{}
			roots := []Hash{EmptyRoot()}
			var vs []Hash
			for _, k := range batches {
				size := len(vs)
				for j := range k {
					h := byte(0)
					if size+j >= forkAt {
						h = history
					}
					vs = append(vs, value(h, size+j))
				}
				root, err := Append(ctx, s, uint64(size), vs[size:]...)
				if err != nil {
					t.Fatalf("Append(%d leaves at %d): %v", k, size, err)
				}
				// Sizes inside a batch were never returned, so take them from
				// the store; the batch's own size must match what Append said.
				for n := size + 1; n <= len(vs); n++ {
					r, err := Root(ctx, s, uint64(n))
					if err != nil {
						t.Fatalf("Root(%d): %v", n, err)
					}
					roots = append(roots, r)
				}
				if roots[len(vs)] != root {
					t.Fatalf("Root(%d) = %x, Append returned %x", len(vs), roots[len(vs)], root)
				}
			}
			return s, vs, roots
		}

		s, vs, roots := grow(0, 1<<30)
		size := len(vs)
		if want := newRef(vs).mth(0, size); roots[size] != want {
			t.Fatalf("root %x, RFC 6962 MTH %x", roots[size], want)
		}
		for m := 0; m <= size; m++ {
			for n := m; n <= size; n++ {
				p, err := ConsistencyProof(ctx, s, uint64(m), uint64(n))
				if err != nil {
					t.Fatalf("ConsistencyProof(%d, %d): %v", m, n, err)
				}
				if err := VerifyConsistency(uint64(m), uint64(n), roots[m], roots[n], p); err != nil {
					t.Fatalf("VerifyConsistency(%d, %d): %v", m, n, err)
				}
			}
			for i := range m {
				p, err := InclusionProof(ctx, s, uint64(i), uint64(m))
				if err != nil {
					t.Fatalf("InclusionProof(%d, %d): %v", i, m, err)
				}
				if err := VerifyInclusion(vs[i], uint64(i), uint64(m), p, roots[m]); err != nil {
					t.Fatalf("VerifyInclusion(%d, %d): %v", i, m, err)
				}
			}
		}

		if size == 0 {
			return
		}
		// A log that rewrites history from leaf forkAt on: any root of it at a
		// size past the fork must be refused against the honest log's proofs.
		forkAt := rapid.IntRange(0, size-1).Draw(t, "forkAt")
		_, _, forkRoots := grow(1, forkAt)
		for m := forkAt + 1; m <= size; m++ {
			for n := m; n <= size; n++ {
				p, err := ConsistencyProof(ctx, s, uint64(m), uint64(n))
				if err != nil {
					t.Fatal(err)
				}
				if VerifyConsistency(uint64(m), uint64(n), forkRoots[m], roots[n], p) == nil {
					t.Fatalf("forked root at size %d accepted as consistent with size %d", m, n)
				}
			}
		}
	})
}
