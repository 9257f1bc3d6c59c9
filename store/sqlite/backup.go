package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the whole journal file (every tenant)
// to dst while writers go on, with SQLite's VACUUM INTO on a read
// connection: the copy is one read snapshot, so it holds exactly the
// transactions committed before the snapshot began, and writers are not
// blocked (WAL mode). dst must not exist; the copy is fsynced, and so is its
// directory, before Backup returns. A copy is not yet known to be intact:
// verify it (every tenant's chains and log) before calling it a backup.
//
// The copy holds every record of the journal, so it is readable by its
// owner only (0600, as the journal is), whatever the umask: dst is created
// empty with that mode before SQLite writes into it, and SQLite gives any
// journal it keeps beside the copy while writing it the copy's mode.
func (s *Store) Backup(ctx context.Context, dst string) error {
	// The store's readers are query_only, which VACUUM INTO refuses, so the
	// copy takes a connection of its own; it only reads the journal.
	var seq int
	var name, src string
	if err := s.rdb.QueryRowContext(ctx, `PRAGMA database_list`).Scan(&seq, &name, &src); err != nil {
		return fmt.Errorf("backup: find the journal file: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+src+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	// O_EXCL makes "does it exist" and "create it" one step.
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("backup: %s already exists; nothing was written", dst)
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(dst)
		return fmt.Errorf("backup: %w", err)
	}
	// VACUUM INTO writes into an empty file that exists, keeping its mode.
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		os.Remove(dst) // a half-written copy is debris, never a backup
		os.Remove(dst + "-journal")
		return fmt.Errorf("backup: copy into %s: %w", dst, err)
	}
	if s.wal != nil {
		// The copy read through a connection of its own, which does not
		// wait for the WAL flush: wait now, so the backup holds nothing
		// the journal itself could still lose.
		if err := s.wal.awaitDurable(ctx); err != nil {
			os.Remove(dst)
			return fmt.Errorf("backup: %w", err)
		}
	}
	if err := syncFile(dst); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// Tenants lists every tenant that holds anything in the file (a run, a log
// or a signed checkpoint), in order. A check of a whole file walks these.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT tenant FROM runs UNION SELECT tenant FROM logs
		UNION SELECT tenant FROM signed_checkpoints ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("list tenants: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return out, nil
}

// syncFile fsyncs a file or a directory by path.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}
