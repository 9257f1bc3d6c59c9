package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/internal/benchjournal"
	"github.com/runseal/runseal/log"
)

// TestCreateSealedLog_ServesVerifiableProofs builds a log through the bulk
// path and holds the store's proofs from it to the checkpoint's root (the
// bench would otherwise time wrong answers).
func TestCreateSealedLog_ServesVerifiableProofs(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	const n = 1000
	runs, tree, err := CreateSealedLog(ctx, path, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateSealedLog(ctx, path, n); err == nil {
		t.Fatal("CreateSealedLog over an existing file: no error")
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != n {
		t.Fatalf("checkpoint size %d, want %d", cp.Size, n)
	}
	rep, err := benchjournal.ProofBench(ctx, s, runs, tree, cp.Size, log.Hash(cp.Root), 100)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Inclusion.NodeReads < 1 || rep.Consistency.NodeReads < 1 {
		t.Fatalf("node reads %+v", rep)
	}
}
