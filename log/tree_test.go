package log

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/bits"
	"slices"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"
)

func mustHex(t *testing.T, s string) Hash {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return Hash(b)
}

// TestPinnedVectors pins the hashes from the design notes in full, so a
// change of prefix, order or empty-root convention cannot slip through.
func TestPinnedVectors(t *testing.T) {
	ctx := context.Background()
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))

	s := &MemStore{}
	root, err := Append(ctx, s, 0, a, b)
	if err != nil {
		t.Fatal(err)
	}
	oneRoot, err := Root(ctx, s, 1)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		got  Hash
		want string
	}{
		{"LeafHash(SHA256(a))", LeafHash(a), "a23bd5b06da9048238a65b3f1d9d0b9e15fae3dde262688e6489aa4c763d1820"},
		{"LeafHash(SHA256(b))", LeafHash(b), "a0d9f0a50b35b9f7d7edc57fb64f4771ddef0fefeaca4e6f949a1514db5b136d"},
		{"root of one leaf a is its leaf hash", oneRoot, "a23bd5b06da9048238a65b3f1d9d0b9e15fae3dde262688e6489aa4c763d1820"},
		{"root of a, b", root, "ad5ca6cddc0b27c6a83e332bf28011769236e6c6a1f786ebf7b5267b37a5bd22"},
		{"EmptyRoot", EmptyRoot(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	for _, tt := range tests {
		if want := mustHex(t, tt.want); tt.got != want {
			t.Errorf("%s = %x, want %x", tt.name, tt.got, want)
		}
	}
	if got, err := Root(ctx, s, 0); err != nil || got != EmptyRoot() {
		t.Errorf("Root(0) = %x, %v; want the empty root", got, err)
	}
	if EmptyRoot() == (Hash{}) {
		t.Error("EmptyRoot is 32 zero bytes")
	}
}

// TestHashChildrenMatchesLibrary guards the one hash this package computes by
// hand against the library's RFC 6962 hasher.
func TestHashChildrenMatchesLibrary(t *testing.T) {
	for i := range uint64(8) {
		l, r := leafValue(i), leafValue(i+100)
		got := hashChildren(l[:], r[:])
		want := rfc6962.DefaultHasher.HashChildren(l[:], r[:])
		if !slices.Equal(got, want) {
			t.Fatalf("hashChildren = %x, rfc6962 = %x", got, want)
		}
		lh := LeafHash(l)
		if want := rfc6962.DefaultHasher.HashLeaf(l[:]); !slices.Equal(lh[:], want) {
			t.Fatalf("LeafHash = %x, rfc6962 = %x", lh, want)
		}
	}
}

const maxExhaustive = 72

// TestAgainstReferences checks, for every size up to maxExhaustive and every
// index and old size, that roots and proofs equal RFC 6962's definitions
// exactly and that three independent verifiers (ours, transparency-dev/merkle
// and golang.org/x/mod/sumdb/tlog) accept them.
func TestAgainstReferences(t *testing.T) {
	ctx := context.Background()
	vs := leafValues(maxExhaustive)
	s := buildStore(t, vs)
	rf := newRef(vs)
	tl := newTlogMirror(t, vs)
	h := rfc6962.DefaultHasher

	roots := make([]Hash, maxExhaustive+1)
	for n := range uint64(maxExhaustive + 1) {
		root, err := Root(ctx, s, n)
		if err != nil {
			t.Fatalf("Root(%d): %v", n, err)
		}
		if want := rf.mth(0, int(n)); root != want {
			t.Fatalf("Root(%d) = %x, RFC 6962 MTH = %x", n, root, want)
		}
		if n > 0 {
			th, err := tlog.TreeHash(int64(n), tl)
			if err != nil {
				t.Fatalf("tlog.TreeHash(%d): %v", n, err)
			}
			if root != Hash(th) {
				t.Fatalf("Root(%d) = %x, tlog.TreeHash = %x", n, root, th)
			}
		}
		roots[n] = root
	}

	for n := uint64(1); n <= maxExhaustive; n++ {
		for i := range n {
			p, err := InclusionProof(ctx, s, i, n)
			if err != nil {
				t.Fatalf("InclusionProof(%d, %d): %v", i, n, err)
			}
			if want := rf.path(int(i), 0, int(n)); !slices.Equal(p, want) {
				t.Fatalf("InclusionProof(%d, %d) = %x, RFC 6962 PATH = %x", i, n, p, want)
			}
			if err := VerifyInclusion(vs[i], i, n, p, roots[n]); err != nil {
				t.Fatalf("VerifyInclusion(%d, %d): %v", i, n, err)
			}
			lh := LeafHash(vs[i])
			if err := proof.VerifyInclusion(h, i, n, lh[:], toSlices(p), roots[n][:]); err != nil {
				t.Fatalf("merkle proof.VerifyInclusion(%d, %d): %v", i, n, err)
			}
			if err := tlog.CheckRecord(toTlog(p), int64(n), tlog.Hash(roots[n]), int64(i), tlog.RecordHash(vs[i][:])); err != nil {
				t.Fatalf("tlog.CheckRecord(%d, %d): %v", i, n, err)
			}
			tp, err := tlog.ProveRecord(int64(n), int64(i), tl)
			if err != nil {
				t.Fatalf("tlog.ProveRecord(%d, %d): %v", n, i, err)
			}
			if !slices.Equal(toTlog(p), tp) {
				t.Fatalf("InclusionProof(%d, %d) differs from tlog.ProveRecord", i, n)
			}
		}

		for m := range n + 1 {
			p, err := ConsistencyProof(ctx, s, m, n)
			if err != nil {
				t.Fatalf("ConsistencyProof(%d, %d): %v", m, n, err)
			}
			var want []Hash
			if m > 0 {
				want = rf.subproof(int(m), 0, int(n), true)
			}
			if !slices.Equal(p, want) {
				t.Fatalf("ConsistencyProof(%d, %d) = %x, RFC 6962 PROOF = %x", m, n, p, want)
			}
			if err := VerifyConsistency(m, n, roots[m], roots[n], p); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", m, n, err)
			}
			if err := proof.VerifyConsistency(h, m, n, toSlices(p), roots[m][:], roots[n][:]); err != nil {
				t.Fatalf("merkle proof.VerifyConsistency(%d, %d): %v", m, n, err)
			}
			if m == 0 {
				continue // tlog has no notion of a proof from the empty tree
			}
			if err := tlog.CheckTree(toTlog(p), int64(n), tlog.Hash(roots[n]), int64(m), tlog.Hash(roots[m])); err != nil {
				t.Fatalf("tlog.CheckTree(%d, %d): %v", m, n, err)
			}
			tp, err := tlog.ProveTree(int64(n), int64(m), tl)
			if err != nil {
				t.Fatalf("tlog.ProveTree(%d, %d): %v", n, m, err)
			}
			if !slices.Equal(toTlog(p), tp) {
				t.Fatalf("ConsistencyProof(%d, %d) differs from tlog.ProveTree", m, n)
			}
		}
	}
}

// TestSizesNear2To64 runs the whole API on a constant tree at sizes no real
// store reaches, where shifts and +1s overflow if anything is off by one, and
// checks every proof against the root with both verifiers.
func TestSizesNear2To64(t *testing.T) {
	ctx := context.Background()
	const max = ^uint64(0)
	c := newConstTree(leafValue(7))
	sizes := []uint64{1, 2, 3, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, 1<<63 + 1, max - 2, max - 1, max}
	for _, n := range sizes {
		root, err := Root(ctx, c, n)
		if err != nil {
			t.Fatalf("Root(%d): %v", n, err)
		}
		for _, i := range []uint64{0, 1, n / 2, n - 2, n - 1} {
			if i >= n {
				continue
			}
			p, err := InclusionProof(ctx, c, i, n)
			if err != nil {
				t.Fatalf("InclusionProof(%d, %d): %v", i, n, err)
			}
			if err := VerifyInclusion(c.value, i, n, p, root); err != nil {
				t.Errorf("VerifyInclusion(%d, %d): %v", i, n, err)
			}
			lh := LeafHash(c.value)
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, n, lh[:], toSlices(p), root[:]); err != nil {
				t.Errorf("merkle VerifyInclusion(%d, %d): %v", i, n, err)
			}
			if len(p) > 64 {
				t.Errorf("InclusionProof(%d, %d) has %d hashes", i, n, len(p))
			}
		}
		for _, m := range []uint64{0, 1, 2, 3, 1 << 32, 1<<63 - 1, 1 << 63, max - 1, max} {
			if m > n {
				continue
			}
			oldRoot, err := Root(ctx, c, m)
			if err != nil {
				t.Fatalf("Root(%d): %v", m, err)
			}
			p, err := ConsistencyProof(ctx, c, m, n)
			if err != nil {
				t.Fatalf("ConsistencyProof(%d, %d): %v", m, n, err)
			}
			if err := VerifyConsistency(m, n, oldRoot, root, p); err != nil {
				t.Errorf("VerifyConsistency(%d, %d): %v", m, n, err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, m, n, toSlices(p), oldRoot[:], root[:]); err != nil {
				t.Errorf("merkle VerifyConsistency(%d, %d): %v", m, n, err)
			}
		}
	}

	// The last leaf a tree can have: appending it must write a leaf and its
	// completed parents (checked by constTree) and give Root(max).
	want, err := Root(ctx, c, max)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Append(ctx, c, max-1, c.value)
	if err != nil {
		t.Fatalf("Append at 2^64-2: %v", err)
	}
	if got != want {
		t.Errorf("Append at 2^64-2 = %x, Root(2^64-1) = %x", got, want)
	}
	if c.writes.Load() == 0 {
		t.Error("Append at 2^64-2 wrote nothing")
	}
}

func TestOutOfRange(t *testing.T) {
	ctx := context.Background()
	const max = ^uint64(0)
	c := newConstTree(leafValue(1))
	s := buildStore(t, leafValues(5))
	tests := []struct {
		name string
		call func() error
	}{
		{"InclusionProof index == size", func() error { _, err := InclusionProof(ctx, s, 5, 5); return err }},
		{"InclusionProof index > size", func() error { _, err := InclusionProof(ctx, s, 9, 5); return err }},
		{"InclusionProof size 0", func() error { _, err := InclusionProof(ctx, s, 0, 0); return err }},
		{"InclusionProof max", func() error { _, err := InclusionProof(ctx, c, max, max); return err }},
		{"ConsistencyProof old > new", func() error { _, err := ConsistencyProof(ctx, s, 5, 4); return err }},
		{"ConsistencyProof max > 0", func() error { _, err := ConsistencyProof(ctx, c, max, 0); return err }},
		{"Append past 2^64-1", func() error { _, err := Append(ctx, c, max, c.value); return err }},
		{"Append two at 2^64-2", func() error { _, err := Append(ctx, c, max-1, c.value, c.value); return err }},
		{"VerifyInclusion index == size", func() error { return VerifyInclusion(Hash{}, 3, 3, nil, Hash{}) }},
		{"VerifyInclusion size 0", func() error { return VerifyInclusion(EmptyRoot(), 0, 0, nil, EmptyRoot()) }},
		{"VerifyConsistency old > new", func() error { return VerifyConsistency(4, 3, Hash{}, Hash{}, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var re *RangeError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a *RangeError", err)
			}
			if re.Op == "" || re.Detail == "" {
				t.Errorf("RangeError without Op or Detail: %#v", re)
			}
		})
	}
	if c.writes.Load() != 0 {
		t.Errorf("a refused Append wrote %d nodes", c.writes.Load())
	}
	// Refusals by a verifier are also plain "not verified".
	if err := VerifyConsistency(4, 3, Hash{}, Hash{}, nil); !errors.Is(err, ErrProofInvalid) {
		t.Errorf("VerifyConsistency(4, 3) = %v, want ErrProofInvalid", err)
	}
	if err := VerifyInclusion(Hash{}, 3, 3, nil, Hash{}); !errors.Is(err, ErrProofInvalid) {
		t.Errorf("VerifyInclusion(3, 3) = %v, want ErrProofInvalid", err)
	}
}

// TestEmptyAndEqualSizes covers the consistency cases RFC 9162 leaves to the
// caller, which transparency-dev/merkle answers differently across versions.
func TestEmptyAndEqualSizes(t *testing.T) {
	ctx := context.Background()
	s := buildStore(t, leafValues(6))
	r3, _ := Root(ctx, s, 3)
	r6, _ := Root(ctx, s, 6)
	e := EmptyRoot()
	anyHash := leafValue(99)

	for _, tt := range []struct{ old, new uint64 }{{0, 0}, {0, 1}, {0, 6}, {3, 3}, {6, 6}} {
		p, err := ConsistencyProof(ctx, s, tt.old, tt.new)
		if err != nil || p == nil || len(p) != 0 {
			t.Errorf("ConsistencyProof(%d, %d) = %x, %v; want an empty proof", tt.old, tt.new, p, err)
		}
	}

	tests := []struct {
		name             string
		old, new         uint64
		oldRoot, newRoot Hash
		proof            []Hash
		ok               bool
	}{
		{"0 to 0", 0, 0, e, e, nil, true},
		{"0 to 6", 0, 6, e, r6, nil, true},
		{"0 to 6, any new root", 0, 6, e, anyHash, nil, true},
		{"0 to 0, new root not empty", 0, 0, e, r3, nil, false},
		{"0 to 6, old root zero bytes", 0, 6, Hash{}, r6, nil, false},
		{"0 to 6, old root not empty", 0, 6, r3, r6, nil, false},
		{"0 to 6, non-empty proof", 0, 6, e, r6, []Hash{r6}, false},
		{"3 to 3", 3, 3, r3, r3, nil, true},
		{"6 to 6", 6, 6, r6, r6, []Hash{}, true},
		{"3 to 3, fork", 3, 3, r3, r6, nil, false},
		{"3 to 3, non-empty proof", 3, 3, r3, r3, []Hash{r3}, false},
		{"3 to 6, empty proof", 3, 6, r3, r6, nil, false},
	}
	for _, tt := range tests {
		err := VerifyConsistency(tt.old, tt.new, tt.oldRoot, tt.newRoot, tt.proof)
		if tt.ok && err != nil {
			t.Errorf("%s: %v, want nil", tt.name, err)
		}
		if !tt.ok && !errors.Is(err, ErrProofInvalid) {
			t.Errorf("%s: %v, want ErrProofInvalid", tt.name, err)
		}
	}
}

// TestBoundedReads shows that no operation scans: at about a million leaves,
// each reads O(log n) nodes in one call to the store.
func TestBoundedReads(t *testing.T) {
	ctx := context.Background()
	s, n := bigStore(t)
	cr := &countingReader{NodeWriter: s}
	limit := 2 * bits.Len64(n) // 40 at 1e6, well under the 2*64 ceiling

	most := map[string]int{}
	defer func() { t.Logf("most nodes read at size %d: %v (limit %d)", n, most, limit) }()
	check := func(t *testing.T, what string, wantCalls int) {
		t.Helper()
		calls, ids := cr.reset()
		most[what] = max(most[what], ids)
		if calls != wantCalls || ids > limit {
			t.Errorf("%s: %d calls reading %d nodes; want %d call(s), <= %d nodes", what, calls, ids, wantCalls, limit)
		}
	}
	root, err := Root(ctx, cr, n)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "Root", 1)
	for _, i := range []uint64{0, 1, n / 3, n / 2, n - 2, n - 1} {
		p, err := InclusionProof(ctx, cr, i, n)
		if err != nil {
			t.Fatal(err)
		}
		check(t, "InclusionProof", 1)
		if err := VerifyInclusion(leafValue(i), i, n, p, root); err != nil {
			t.Fatalf("VerifyInclusion(%d, %d): %v", i, n, err)
		}
	}
	for _, m := range []uint64{1, 2, 3, 1000, n / 2, n - 1} {
		if _, err := ConsistencyProof(ctx, cr, m, n); err != nil {
			t.Fatal(err)
		}
		check(t, "ConsistencyProof", 1)
	}
	for _, m := range []uint64{0, n} {
		if _, err := ConsistencyProof(ctx, cr, m, n); err != nil {
			t.Fatal(err)
		}
		check(t, "trivial ConsistencyProof", 0)
	}
	// Append into a copy-free view: a counting writer over a constant tree of
	// the same size, so the shared store stays unchanged.
	ccr := &countingReader{NodeWriter: newConstTree(leafValue(3))}
	if _, err := Append(ctx, ccr, n, leafValue(3), leafValue(3)); err != nil {
		t.Fatal(err)
	}
	if calls, ids := ccr.reset(); calls != 1 || ids > limit {
		t.Errorf("Append: %d calls reading %d nodes", calls, ids)
	}
}
