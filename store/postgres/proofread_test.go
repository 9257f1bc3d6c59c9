package postgres

import (
	"context"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/runseal/runseal/log"
)

// TestProofs_OneRoundTripEach: with the node cache warm, every inclusion
// proof (at the committed size and at past sizes) and every consistency
// proof costs exactly one round trip to the database, and each verifies
// with x/mod's tlog. The cache is held to a few levels so that its floor
// (2) leaves the leaf's sibling, its parent's and the right border's
// low nodes to the one statement; the size's low bits are set so that the
// right border has nodes below the floor.
func TestProofs_OneRoundTripEach(t *testing.T) {
	ctx := context.Background()
	const chunk = 256*32 + 256/8
	s := openStore(t, Options{NodeCacheBytes: 8 * chunk})
	const n = 1003
	runs, tree := sealedLog(t, s, n)
	if err := s.WarmNodeCache(ctx); err != nil {
		t.Fatal(err)
	}
	if f := s.nodeCache.Floor(); f != 2 {
		t.Fatalf("cache floor %d, want 2 (the test's premise)", f)
	}
	roots := map[uint64]tlog.Hash{}
	root := func(size uint64) tlog.Hash {
		if h, ok := roots[size]; ok {
			return h
		}
		h, err := log.Root(ctx, tree, size)
		if err != nil {
			t.Fatal(err)
		}
		roots[size] = tlog.Hash(h)
		return roots[size]
	}
	trips := func(what string, fn func() error) {
		t.Helper()
		before := s.ProofRoundTrips()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := s.ProofRoundTrips() - before; got != 1 {
			t.Fatalf("%s: %d round trips, want 1", what, got)
		}
	}
	for i, run := range runs {
		for _, at := range []uint64{n, uint64(i) + 1, uint64(i) + 2, 513, 1000} {
			if at <= uint64(i) || at > n {
				continue
			}
			trips("inclusion", func() error {
				inc, err := s.InclusionProofAt(ctx, run, at)
				if err != nil || inc == nil {
					t.Fatalf("inclusion of run %d at %d: %+v %v", i, at, inc, err)
				}
				p := make(tlog.RecordProof, len(inc.Proof))
				for k, d := range inc.Proof {
					p[k] = tlog.Hash(d)
				}
				return tlog.CheckRecord(p, int64(at), root(at), int64(i), tlog.RecordHash(inc.Leaf[:]))
			})
		}
	}
	for old := uint64(1); old <= n; old++ {
		trips("consistency", func() error {
			proof, err := s.ConsistencyProof(ctx, old, n)
			if err != nil {
				t.Fatalf("consistency %d..%d: %v", old, n, err)
			}
			p := make(tlog.TreeProof, len(proof))
			for k, d := range proof {
				p[k] = tlog.Hash(d)
			}
			return tlog.CheckTree(p, n, root(n), int64(old), root(old))
		})
	}
}
