package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/runseal/runseal/store"
)

// LogLeaves returns the leaf values (sealed runs' terminal hashes) at log
// indexes start to end-1, for the tlog-tiles entry bundles; a position the
// log does not hold is a store.NotFoundError-class error, never skipped.
func (s *Store) LogLeaves(ctx context.Context, start, end uint64) ([]store.Digest, error) {
	if err := store.ValidateLogRange(start, end); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT log_index, leaf FROM runs WHERE tenant=? AND log_index>=? AND log_index<? ORDER BY log_index`,
		s.tenant, int64(start), int64(end))
	if err != nil {
		return nil, fmt.Errorf("log leaves: %w", err)
	}
	return scanRange(rows, "log leaf", start, end)
}

// LogNodes returns the stored Merkle node hashes at tree level for indexes
// start to end-1 (level 0 holds leaf hashes), for the tlog-tiles hash tiles.
func (s *Store) LogNodes(ctx context.Context, level uint, start, end uint64) ([]store.Digest, error) {
	if err := store.ValidateLogRange(start, end); err != nil {
		return nil, err
	}
	if level > 63 {
		return nil, &store.InvalidArgumentError{Field: "level", Detail: fmt.Sprintf("%d is above 63", level)}
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT idx, hash FROM log_nodes WHERE tenant=? AND level=? AND idx>=? AND idx<? ORDER BY idx`,
		s.tenant, int64(level), int64(start), int64(end))
	if err != nil {
		return nil, fmt.Errorf("log nodes: %w", err)
	}
	return scanRange(rows, fmt.Sprintf("log node at level %d", level), start, end)
}

// scanRange reads (index, 32-byte hash) rows that must be exactly the
// indexes start to end-1 in order.
func scanRange(rows *sql.Rows, what string, start, end uint64) ([]store.Digest, error) {
	defer rows.Close()
	r := store.LogRange{What: what, Start: start, End: end}
	for rows.Next() {
		var idx int64
		var h []byte
		if err := rows.Scan(&idx, &h); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := r.Add(idx, h); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return r.Done()
}
