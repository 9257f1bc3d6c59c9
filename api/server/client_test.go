package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// TestClient_RoundTrip drives the API through the Client: leases, append,
// seal, records, signing, and proofs that verify against the signed root.
func TestClient_RoundTrip(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	r1 := ts.sealedRun(3)
	ts.sealedRun(4)
	n, err := ts.c.SignCheckpoint(ctx)
	if err != nil || !strings.Contains(string(n), "\n2\n") {
		t.Fatalf("sign: %q %v", n, err)
	}
	cp, err := ts.st.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := ts.c.Inclusion(ctx, r1, 2)
	if err != nil || inc.Index != 0 || inc.Size != 2 {
		t.Fatalf("inclusion: %+v %v", inc, err)
	}
	hs, err := api.DecodeHashes(inc.Proof)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ts.c.Head(ctx, r1)
	if err != nil || h.Seq != 3 {
		t.Fatalf("head: %+v %v", h, err)
	}
	if err := log.VerifyInclusion(log.Hash(h.Hash), inc.Index, 2, toLog(hs), log.Hash(cp.Root)); err != nil {
		t.Fatalf("inclusion does not verify: %v", err)
	}
	if _, err := ts.c.Consistency(ctx, 1, 2); err != nil {
		t.Fatalf("consistency: %v", err)
	}
	// Refusals come back as *Error of their class.
	if _, err := ts.c.Acquire(ctx, r1, "another", time.Minute); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("acquire of a held lease: %v, want a conflict", err)
	}
	anon, _ := api.NewClient(ts.url, api.ClientOptions{})
	if _, err := anon.Checkpoint(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
}

func toLog(ds []store.Digest) []log.Hash {
	out := make([]log.Hash, len(ds))
	for i, d := range ds {
		out[i] = log.Hash(d)
	}
	return out
}
