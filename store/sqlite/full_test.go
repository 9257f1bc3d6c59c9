package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// TestAppend_FullDiskIsNamedAndRecovers: a write refused for want of space
// (SQLITE_FULL, here from max_page_count, as ENOSPC gives it) is a
// *store.StorageFullError, not an unknown commit outcome, whether it fails
// in a statement or at COMMIT; nothing of it is kept; and once room
// returns the same handle writes again.
func TestAppend_FullDiskIsNamedAndRecovers(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "t", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.wdb.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wdb.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count=%d`, pages+40)); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("p", 8<<10)
	var full error
	var acked store.Seq
	for i := 0; i < 1000 && full == nil; i++ {
		recs, err := s.Append(ctx, l.Epoch, []store.Append{{Run: run, Kind: "Step", Fields: []byte(`{"pad":"` + pad + `"}`)}})
		if err != nil {
			full = err
			break
		}
		acked = recs[0].Seq
	}
	var fe *store.StorageFullError
	if !errors.Is(full, store.ErrStorageFull) || !errors.As(full, &fe) || errors.Is(full, store.ErrCommitUnknown) {
		t.Fatalf("append on a full journal: %v; want a StorageFullError, not in doubt", full)
	}
	if h, err := s.Head(ctx, run); err != nil || h.Seq != acked {
		t.Fatalf("head after the refused append: %+v, %v; want seq %d", h, err, acked)
	}
	if _, err := s.wdb.ExecContext(ctx, `PRAGMA max_page_count=1073741823`); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Append(ctx, l.Epoch, []store.Append{{Run: run, Kind: "Step", Fields: []byte(`{"pad":"` + pad + `"}`)}})
	if err != nil {
		t.Fatalf("append once room returned: %v", err)
	}
	if recs[0].Seq != acked+1 {
		t.Fatalf("append once room returned took seq %d, want %d", recs[0].Seq, acked+1)
	}
	if _, err := s.Verify(ctx, run); err != nil {
		t.Fatal(err)
	}
}
