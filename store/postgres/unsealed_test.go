package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestUnsealedByEdit_OldSchemaIsIndexedOnOpen: a schema at version 8,
// made before the log's leaves were indexed by hash, whose run was sealed
// and then unsealed by an edit while no store had it open, gets the index
// when this version opens it, and the run's Verify and an append to it
// are refused.
func TestUnsealedByEdit_OldSchemaIsIndexedOnOpen(t *testing.T) {
	ctx := context.Background()
	schema, qs := statsSchema(t, "unsealed")
	s, err := New(ctx, testPool(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{{Run: run, Kind: "Note", Fields: []byte(`{}`)},
		{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, run, 1, "succeeded"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Make the schema what version 8 wrote, then remove the run's seal.
	for _, q := range []string{
		`DROP INDEX ` + qs + `.log_leaf_hashes`,
		`DELETE FROM ` + qs + `.migrations WHERE version > 8`,
		`UPDATE ` + qs + `.runs SET sealed_outcome = NULL, sealed_at = NULL, log_index = NULL, leaf = NULL`,
	} {
		if _, err := testPool(t).Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err = New(ctx, testPool(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var indexed bool
	if err := testPool(t).QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = 'log_leaf_hashes')`, schema).Scan(&indexed); err != nil || !indexed {
		t.Fatalf("log_leaf_hashes after opening a version 8 schema: %v, %v", indexed, err)
	}
	var ce *store.CorruptError
	if _, err := s.Verify(ctx, run); !errors.As(err, &ce) {
		t.Fatalf("Verify of the unsealed run = %v, want a *store.CorruptError", err)
	}
	if _, err := s.Append(ctx, 1, []store.Append{{Run: run, Kind: "Note", Fields: []byte(`{}`)}}); !errors.As(err, &ce) || ce.Seq != 2 {
		t.Fatalf("Append to the unsealed run = %v, want a *store.CorruptError at its head, seq 2", err)
	}
}
