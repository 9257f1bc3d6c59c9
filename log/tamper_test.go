package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

const maxTamper = 40

// wantInvalid fails the test unless err says the proof does not verify.
func wantInvalid(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	if !errors.Is(err, ErrProofInvalid) {
		t.Fatalf(format+": got %v, want ErrProofInvalid", append(args, err)...)
	}
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Reason == "" {
		t.Fatalf(format+": %v is not a *VerifyError with a reason", append(args, err)...)
	}
}

// mutations returns every tampered variant of p: each byte flipped, each
// element dropped, and extra elements inserted at both ends.
func mutations(p []Hash, extra Hash) map[string][]Hash {
	out := map[string][]Hash{}
	for i := range p {
		for j := range 32 {
			q := slices.Clone(p)
			q[i][j] ^= 0x01
			out[fmt.Sprintf("flip element %d byte %d", i, j)] = q
		}
		out[fmt.Sprintf("drop element %d", i)] = slices.Delete(slices.Clone(p), i, i+1)
	}
	out["append"] = append(slices.Clone(p), extra)
	out["prepend"] = append([]Hash{extra}, p...)
	out["append zero"] = append(slices.Clone(p), Hash{})
	if len(p) > 0 {
		out["duplicate last"] = append(slices.Clone(p), p[len(p)-1])
	}
	if len(p) > 1 {
		q := slices.Clone(p)
		q[0], q[1] = q[1], q[0]
		out["swap"] = q
	}
	return out
}

// TestTamperedInclusion: any change to an inclusion proof, its leaf, index,
// size or root makes it fail, except a size that leads every RFC 9162
// verifier through exactly the same computation (see the wrong-size case).
func TestTamperedInclusion(t *testing.T) {
	ctx := context.Background()
	vs := leafValues(maxTamper)
	s := buildStore(t, vs)
	extra := leafValue(1000)
	var aliased, refused int
	for n := uint64(1); n <= maxTamper; n++ {
		root, err := Root(ctx, s, n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			p, err := InclusionProof(ctx, s, i, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyInclusion(vs[i], i, n, p, root); err != nil {
				t.Fatalf("untampered (%d, %d): %v", i, n, err)
			}
			for name, q := range mutations(p, extra) {
				wantInvalid(t, VerifyInclusion(vs[i], i, n, q, root), "(%d, %d) %s", i, n, name)
			}
			badRoot := root
			badRoot[31] ^= 0x80
			wantInvalid(t, VerifyInclusion(vs[i], i, n, p, badRoot), "(%d, %d) wrong root", i, n)
			wantInvalid(t, VerifyInclusion(extra, i, n, p, root), "(%d, %d) wrong leaf", i, n)
			// The leaf hash passed as if it were the value must not verify:
			// the prefix is applied exactly once.
			wantInvalid(t, VerifyInclusion(LeafHash(vs[i]), i, n, p, root), "(%d, %d) leaf hash as value", i, n)
			for j := range n {
				if j != i {
					wantInvalid(t, VerifyInclusion(vs[i], j, n, p, root), "(%d, %d) at wrong index %d", i, n, j)
				}
			}
			wantInvalid(t, VerifyInclusion(vs[i], n, n, p, root), "(%d, %d) index = size", i, n)

			// RFC 6962 binds a root to its leaves, not to its size: another
			// size whose proof shape is identical recomputes the same root. The
			// signed checkpoint is what binds the size. So a wrong size must
			// fail exactly when its shape differs.
			shape, ok := inclusionShape(i, n, len(p))
			if !ok {
				t.Fatalf("test bug: no shape for a valid proof (%d, %d)", i, n)
			}
			for n2 := i + 1; n2 <= 2*maxTamper; n2++ {
				if n2 == n {
					continue
				}
				err := VerifyInclusion(vs[i], i, n2, p, root)
				if s2, ok := inclusionShape(i, n2, len(p)); ok && s2 == shape {
					if err != nil {
						t.Fatalf("(%d, %d) at size %d with identical shape: %v", i, n, n2, err)
					}
					aliased++
					continue
				}
				wantInvalid(t, err, "(%d, %d) at wrong size %d", i, n, n2)
				refused++
			}
		}
	}
	// Both branches must have run, or the size checks above tested nothing.
	if aliased == 0 || refused == 0 {
		t.Errorf("wrong sizes: %d aliased, %d refused; want both > 0", aliased, refused)
	}
	t.Logf("wrong sizes: %d refused, %d with an identical shape verified", refused, aliased)
}

// TestTamperedConsistency is TestTamperedInclusion for consistency proofs.
func TestTamperedConsistency(t *testing.T) {
	ctx := context.Background()
	vs := leafValues(maxTamper)
	s := buildStore(t, vs)
	roots := make([]Hash, maxTamper+1)
	for n := range roots {
		var err error
		if roots[n], err = Root(ctx, s, uint64(n)); err != nil {
			t.Fatal(err)
		}
	}
	extra := leafValue(2000)
	var aliased, refused int
	for n := uint64(2); n <= maxTamper; n++ {
		for m := uint64(1); m < n; m++ {
			p, err := ConsistencyProof(ctx, s, m, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyConsistency(m, n, roots[m], roots[n], p); err != nil {
				t.Fatalf("untampered (%d, %d): %v", m, n, err)
			}
			for name, q := range mutations(p, extra) {
				wantInvalid(t, VerifyConsistency(m, n, roots[m], roots[n], q), "(%d, %d) %s", m, n, name)
			}
			wantInvalid(t, VerifyConsistency(m, n, roots[n], roots[m], p), "(%d, %d) roots swapped", m, n)
			wantInvalid(t, VerifyConsistency(m, n, extra, roots[n], p), "(%d, %d) wrong old root", m, n)
			wantInvalid(t, VerifyConsistency(m, n, roots[m], extra, p), "(%d, %d) wrong new root", m, n)
			wantInvalid(t, VerifyConsistency(n, m, roots[n], roots[m], p), "(%d, %d) reversed", m, n)
			wantInvalid(t, VerifyConsistency(m, n, roots[m], roots[n], nil), "(%d, %d) no proof", m, n)

			// As for inclusion, sizes are bound by the checkpoint, not the
			// proof: only a change of shape must fail.
			shape, ok := consistencyShape(m, n, len(p))
			if !ok {
				t.Fatalf("test bug: no shape for a valid proof (%d, %d)", m, n)
			}
			for m2 := uint64(1); m2 <= n+4; m2++ {
				for n2 := m2 + 1; n2 <= n+8; n2++ {
					if m2 == m && n2 == n {
						continue
					}
					err := VerifyConsistency(m2, n2, roots[m], roots[n], p)
					if s2, ok := consistencyShape(m2, n2, len(p)); ok && s2 == shape {
						if err != nil {
							t.Fatalf("(%d, %d) as (%d, %d) with identical shape: %v", m, n, m2, n2, err)
						}
						aliased++
						continue
					}
					wantInvalid(t, err, "(%d, %d) as (%d, %d)", m, n, m2, n2)
					refused++
				}
			}
		}
	}
	// Both branches must have run, or the size checks above tested nothing.
	if aliased == 0 || refused == 0 {
		t.Errorf("wrong sizes: %d aliased, %d refused; want both > 0", aliased, refused)
	}
	t.Logf("wrong sizes: %d refused, %d with an identical shape verified", refused, aliased)
}
