package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/runseal/runseal/log"
)

// TestProofs_OneStatementPerInclusion: with the node cache warm, an
// inclusion proof (at the committed size and at past sizes) runs exactly
// one statement, which reads the size, the run and every node the proof
// needs below the cache's floor, and a consistency proof two (the size,
// the nodes below the floor); each verifies with x/mod's tlog. The cache
// is held to a few levels so that its floor is 2, and the size's low bits
// are set so that the right border has nodes below it.
func TestProofs_OneStatementPerInclusion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	const n = 1003
	runs, tree, err := CreateSealedLog(ctx, path, n)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 256*32 + 256/8
	s, err := Open(ctx, path, Options{NodeCacheBytes: 8 * chunk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WarmNodeCache(ctx); err != nil {
		t.Fatal(err)
	}
	if f := s.nodeCache().Floor(); f != 2 {
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
	stmts := func(what string, want uint64, fn func() error) {
		t.Helper()
		before := s.ProofRoundTrips()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := s.ProofRoundTrips() - before; got != want {
			t.Fatalf("%s: %d statements, want %d", what, got, want)
		}
	}
	for i, run := range runs {
		for _, at := range []uint64{n, uint64(i) + 1, uint64(i) + 2, 513, 1000} {
			if at <= uint64(i) || at > n {
				continue
			}
			stmts("inclusion", 1, func() error {
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
	for old := uint64(1); old < n; old++ {
		stmts("consistency", 2, func() error {
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
