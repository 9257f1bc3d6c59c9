package log

import (
	"context"
	"testing"
)

// TestForkRoot_ProofReproducesNewRootNotSavedOne: a proof of the newer
// tree's own nodes against a saved root the log never had proves a fork and
// names the tree's real older root; a valid proof, or one that does not
// reproduce the newer root, proves nothing.
func TestForkRoot_ProofReproducesNewRootNotSavedOne(t *testing.T) {
	ctx := context.Background()
	s := buildStore(t, leafValues(8))
	p, err := ConsistencyProof(ctx, s, 3, 8)
	if err != nil {
		t.Fatal(err)
	}
	old, err := Root(ctx, s, 3)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Root(ctx, s, 8)
	if err != nil {
		t.Fatal(err)
	}
	other := leafValue(99)
	for _, tc := range []struct {
		name          string
		oldRoot, root Hash
		fork          bool
	}{
		{"consistent", old, cur, false},
		{"saved root is another tree's", other, cur, true},
		{"proof does not reach the new root", old, other, false},
		{"neither root", other, other, false},
	} {
		alt, ok := ForkRoot(3, 8, tc.oldRoot, tc.root, p)
		if ok != tc.fork {
			t.Errorf("%s: ForkRoot = %v, want %v", tc.name, ok, tc.fork)
		}
		if ok && alt != old {
			t.Errorf("%s: other root %x, want the tree's root %x at size 3", tc.name, alt, old)
		}
	}
}
