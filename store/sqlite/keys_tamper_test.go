package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestVerifyAll_TamperedRecordKeys: a key deleted, edited to point
// elsewhere, or doubled over a record it already covers, in either key
// table, is found by Read, Verify and verify --all (the Checker): the run
// reads with a gap or a repeat, never as a shorter or different chain that
// passes. record_keys_hot has no (tenant, run, seq) key of its own since
// schema version 6, so nothing but the readers stops a second hot key over
// a record.
func TestVerifyAll_TamperedRecordKeys(t *testing.T) {
	tests := []struct {
		name  string
		table string // the key table the run's keys are in
		// sql tampers with the run's keys (?1 is the run).
		sql string
	}{
		{"hot key deleted", "record_keys_hot", `DELETE FROM record_keys_hot WHERE run = ?1 AND seq = 2`},
		{"cold key deleted", "record_keys", `DELETE FROM record_keys WHERE run = ?1 AND seq = 2`},
		{"hot key's seq edited", "record_keys_hot", `UPDATE record_keys_hot SET seq = seq + 5 WHERE run = ?1 AND seq = 2`},
		{"cold key's seq edited", "record_keys", `UPDATE record_keys SET seq = seq + 5 WHERE run = ?1 AND seq = 2`},
		{"hot key's range shortened", "record_keys_hot", `UPDATE record_keys_hot SET n = 1 WHERE run = ?1 AND seq = 4`},
		{"hot key's range widened", "record_keys_hot", `UPDATE record_keys_hot SET n = n + 1 WHERE run = ?1 AND seq = 2`},
		{"second hot key over a hot record", "record_keys_hot",
			// Seqs 2-3, ending at the id of seq 3: both covered twice.
			`INSERT INTO record_keys_hot(id, tenant, run, seq, n) SELECT id + 1, tenant, run, seq + 1, 2 FROM record_keys_hot WHERE run = ?1 AND seq = 2`},
		{"second hot key over a cold record", "record_keys",
			`INSERT INTO record_keys_hot(id, tenant, run, seq, n) SELECT id, tenant, run, seq, n FROM record_keys WHERE run = ?1 AND seq = 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "j.db")
			opts := Options{}
			if tt.table == "record_keys" {
				opts.mergeKeysAt = 1 // every append's keys merged at once
			}
			s := open(t, path, opts)
			run, other := store.NewRunID(), store.NewRunID()
			// Keys: seq 1; seq 2; seqs 3-4 in one row; the other run's seq 1.
			for _, batch := range [][]store.Append{
				{note(run, "a")}, {note(run, "b")}, {note(run, "c"), note(run, "d")}, {note(other, "x")},
			} {
				if _, err := s.Append(ctx, 1, batch); err != nil {
					t.Fatal(err)
				}
			}
			if cold, hot, _, _, _ := keyCounts(t, path); (tt.table == "record_keys") != (cold == 4 && hot == 0) {
				t.Fatalf("set-up: %d cold, %d hot keys; want the run's keys in %s", cold, hot, tt.table)
			}
			tamper(t, path, tt.sql, run.String())

			var ce *store.CorruptError
			if recs, err := s.Read(ctx, run, 1); !errors.As(err, &ce) {
				t.Errorf("Read = %d records, %v; want a CorruptError", len(recs), err)
			}
			if _, err := s.Verify(ctx, run); !errors.As(err, &ce) {
				t.Errorf("Verify = %v; want a CorruptError", err)
			}
			c, err := s.Checker(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sum, err := store.VerifyAll(ctx, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Runs != 2 || sum.Failed != 1 || sum.FirstFailure == nil || sum.FirstFailure.Run != run {
				t.Fatalf("verify --all: %d runs, %d failed, first failure %+v; want the tampered run alone failed", sum.Runs, sum.Failed, sum.FirstFailure)
			}
			if recs, err := s.Read(ctx, other, 1); err != nil || len(recs) != 1 {
				t.Fatalf("the untouched run reads %d records, %v", len(recs), err)
			}
		})
	}
}
