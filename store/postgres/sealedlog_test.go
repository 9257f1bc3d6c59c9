package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// TestCreateSealedLog_ReusesOnlyTheSameLog: the bench log is built once
// (its checkpoint is the in-memory log's root), found again by a second
// call without a row written twice, and any other log in the tenant (a
// different size, or the same size with an altered node) is refused rather
// than measured as if it were the benchmark's (an altered node that the
// root reads: the check is of the size and the root, not of every node).
func TestCreateSealedLog_ReusesOnlyTheSameLog(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	l, err := s.CreateSealedLog(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.Checkpoint(ctx)
	if err != nil || cp.Size != 50 || log.Hash(cp.Root) != l.Root {
		t.Fatalf("checkpoint %+v, %v; want size 50 and root %x", cp, err, l.Root)
	}
	if _, err := s.CreateSealedLog(ctx, 50); err != nil {
		t.Fatalf("the same log again: %v", err)
	}
	var rows int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.runs WHERE tenant = $1`, s.tenant).Scan(&rows); err != nil || rows != 50 {
		t.Fatalf("%d run rows after reuse, %v; want 50", rows, err)
	}
	if _, err := s.CreateSealedLog(ctx, 60); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("another size over a built log: %v, want ErrInvalidArgument", err)
	}
	tamper(t, s, `UPDATE log_nodes SET hash = ? WHERE tenant = ? AND level = 5 AND idx = 0`, make([]byte, 32), s.tenant)
	if _, err := s.CreateSealedLog(ctx, 50); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("the same size with an altered node: %v, want ErrInvalidArgument", err)
	}
}
