package sqlite

import (
	"context"
	"fmt"
)

// File returns the path of the journal's database file as SQLite resolved
// it (absolute), or "" for an in-memory database. A process that must be
// the file's only writer of something (lifecycle/journalstore.Storage) takes an
// OS lock beside this path; two handles on one file report the same path
// however they were opened.
func (s *Store) File(ctx context.Context) (string, error) {
	rows, err := s.rdb.QueryContext(ctx, `PRAGMA database_list`)
	if err != nil {
		return "", fmt.Errorf("journal file: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if err := rows.Scan(&seq, &name, &file); err != nil {
			return "", fmt.Errorf("journal file: %w", err)
		}
		if name == "main" {
			return file, rows.Close()
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("journal file: %w", err)
	}
	return "", fmt.Errorf("journal file: SQLite lists no main database")
}
