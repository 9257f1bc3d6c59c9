package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/store/storetest"
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
	storetest.CheckProofStatements(t, s, runs, tree, 1, 2)
}
