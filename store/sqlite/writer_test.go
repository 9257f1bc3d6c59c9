package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// TestWriter_CheckpointsEvery4000Pages guards the writer's checkpoint
// interval: at SQLite's default of 1000 pages the hot leaf pages of the
// records' key are copied into the file four times as often (see Open).
func TestWriter_CheckpointsEvery4000Pages(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var pages int
	if err := s.wdb.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages != 4000 {
		t.Fatalf("writer checkpoints every %d pages, want 4000", pages)
	}
}
