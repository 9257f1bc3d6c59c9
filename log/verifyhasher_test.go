package log

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"
)

// The verifiers' allocation-light hasher computes exactly rfc6962's hashes.
func TestSumHasher_MatchesRFC6962(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	d := rfc6962.DefaultHasher
	if !bytes.Equal(verifyHasher.EmptyRoot(), d.EmptyRoot()) || verifyHasher.Size() != d.Size() {
		t.Fatal("empty root or size differs from rfc6962")
	}
	for range 200 {
		var l, r Hash
		for i := range l {
			l[i], r[i] = byte(rnd.Uint32()), byte(rnd.Uint32())
		}
		if got, want := verifyHasher.HashChildren(l[:], r[:]), d.HashChildren(l[:], r[:]); !bytes.Equal(got, want) {
			t.Fatalf("HashChildren = %x, rfc6962 = %x", got, want)
		}
		leaf := l[:rnd.IntN(33)]
		if got, want := verifyHasher.HashLeaf(leaf), d.HashLeaf(leaf); !bytes.Equal(got, want) {
			t.Fatalf("HashLeaf(%x) = %x, rfc6962 = %x", leaf, got, want)
		}
	}
}

// On random trees built by x/mod tlog, VerifyInclusion and VerifyConsistency
// give the same verdict as transparency-dev/merkle with rfc6962's hasher, for
// tlog's genuine proofs and for each of them with one bit flipped.
func TestVerify_AgreesWithMerkleAndTlogOnRandomTrees(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	d := rfc6962.DefaultHasher
	for range 20 {
		n := 1 + rnd.Uint64N(300)
		vs := make([]Hash, n)
		for i := range vs {
			for j := range vs[i] {
				vs[i][j] = byte(rnd.Uint32())
			}
		}
		m := newTlogMirror(t, vs)
		th, err := tlog.TreeHash(int64(n), m)
		if err != nil {
			t.Fatal(err)
		}
		root := Hash(th)
		i := rnd.Uint64N(n)
		rp, err := tlog.ProveRecord(int64(n), int64(i), m)
		if err != nil {
			t.Fatal(err)
		}
		old := 1 + rnd.Uint64N(n)
		oth, err := tlog.TreeHash(int64(old), m)
		if err != nil {
			t.Fatal(err)
		}
		tp, err := tlog.ProveTree(int64(n), int64(old), m)
		if err != nil {
			t.Fatal(err)
		}
		for flip := -1; flip < 8*32; flip++ {
			ip := fromTlog(rp)
			cp := fromTlog(tp)
			if flip >= 0 && len(ip) > 0 {
				ip[flip%len(ip)][flip/8%32] ^= 1 << (flip % 8)
			}
			if flip >= 0 && len(cp) > 0 {
				cp[flip%len(cp)][flip/8%32] ^= 1 << (flip % 8)
			}
			lh := LeafHash(vs[i])
			ours := VerifyInclusion(vs[i], i, n, ip, root) == nil
			theirs := proof.VerifyInclusion(d, i, n, lh[:], toSlices(ip), root[:]) == nil
			if ours != theirs || ours != (flip < 0 || len(ip) == 0) {
				t.Fatalf("inclusion of %d in %d, flip %d: ours %v, merkle %v", i, n, flip, ours, theirs)
			}
			ours = VerifyConsistency(old, n, Hash(oth), root, cp) == nil
			theirs = old == n && len(cp) == 0 && oth == th ||
				old < n && proof.VerifyConsistency(d, old, n, toSlices(cp), oth[:], root[:]) == nil
			if ours != theirs || ours != (flip < 0 || len(cp) == 0) {
				t.Fatalf("consistency %d..%d, flip %d: ours %v, merkle %v", old, n, flip, ours, theirs)
			}
		}
	}
}

func fromTlog(hs []tlog.Hash) []Hash {
	out := make([]Hash, len(hs))
	for i, h := range hs {
		out[i] = Hash(h)
	}
	return out
}
