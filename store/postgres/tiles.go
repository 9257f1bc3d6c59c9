package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// LogLeaves returns the leaf values (sealed runs' terminal hashes) at log
// indexes start to end-1, for the tlog-tiles entry bundles; a position the
// log does not hold is a NotFoundError, never skipped.
func (s *Store) LogLeaves(ctx context.Context, start, end uint64) ([]store.Digest, error) {
	if err := store.ValidateLogRange(start, end); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT log_index, leaf FROM `+pgx.Identifier{s.schema}.Sanitize()+`.runs WHERE tenant=$1 AND log_index>=$2 AND log_index<$3 ORDER BY log_index`,
		s.tenant, int64(start), int64(end))
	if err != nil {
		return nil, s.readErr("log leaves", err)
	}
	out, err := scanRange(rows, "log leaf", start, end)
	return out, s.readErr("log leaves", err)
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
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	q, args := s.logNodesQuery(level, start, end)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.readErr("log nodes", err)
	}
	out, err := scanRange(rows, fmt.Sprintf("log node at level %d", level), start, end)
	return out, s.readErr("log nodes", err)
}

// logNodesQuery is LogNodes' statement. Level 0 reads the covering index
// of leaf nodes (proofindex.go), an index-only scan in index order: the
// constant level is what lets the planner use it.
func (s *Store) logNodesQuery(level uint, start, end uint64) (string, []any) {
	t := pgx.Identifier{s.schema, "log_nodes"}.Sanitize()
	if level == 0 {
		return `SELECT idx, hash FROM ` + t + ` WHERE tenant=$1 AND level=0 AND idx>=$2 AND idx<$3 ORDER BY idx`,
			[]any{s.tenant, int64(start), int64(end)}
	}
	return `SELECT idx, hash FROM ` + t + ` WHERE tenant=$1 AND level=$2 AND idx>=$3 AND idx<$4 ORDER BY idx`,
		[]any{s.tenant, int32(level), int64(start), int64(end)}
}

// scanRange reads (index, 32-byte hash) rows that must be exactly the
// indexes start to end-1 in order.
func scanRange(rows pgx.Rows, what string, start, end uint64) ([]store.Digest, error) {
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
