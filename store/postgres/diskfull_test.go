package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runseal/runseal/store"
)

// TestWrap_ServerDiskFullIsStorageFull: PostgreSQL's disk_full (SQLSTATE
// 53100) refused a write as an anonymous infrastructure failure, which the
// API answered 500; it is store.ErrStorageFull (507, naming the disk), as
// SQLite's SQLITE_FULL is, and other server errors are not.
func TestWrap_ServerDiskFullIsStorageFull(t *testing.T) {
	what := func() string { return "append to run r" }
	var s Store
	full := &pgconn.PgError{Code: "53100", Message: `could not extend file "base/16384/16385": No space left on device`}
	err := s.wrap(what, &notWrittenError{err: full})
	if !errors.Is(err, store.ErrStorageFull) {
		t.Fatalf("wrap(disk_full) = %v, want store.ErrStorageFull", err)
	}
	var sf *store.StorageFullError
	var pe *pgconn.PgError
	if !errors.As(err, &sf) || !errors.As(sf.Err, &pe) || pe.Code != "53100" {
		t.Errorf("wrap(disk_full) lost the server's error: %v", err)
	}
	for _, code := range []string{"23505", "40001", "57P01", "53200"} {
		err := s.wrap(what, &notWrittenError{err: &pgconn.PgError{Code: code}})
		if errors.Is(err, store.ErrStorageFull) {
			t.Errorf("wrap(SQLSTATE %s) = %v: only disk_full is storage full", code, err)
		}
	}
}
