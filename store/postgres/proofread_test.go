package postgres

import (
	"context"
	"testing"

	"github.com/runseal/runseal/store/storetest"
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
	storetest.CheckProofStatements(t, s, runs, tree, 1, 1)
}
