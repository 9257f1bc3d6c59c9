package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/runseal/runseal/store"
)

// maxLogRange bounds one LogLeaves or LogNodes call, so that a caller
// cannot make one read hold an unbounded result; tiles read 256 at a time.
const maxLogRange = 1 << 16

func logRange(start, end uint64) error {
	if end < start || end-start > maxLogRange || end > 1<<62 {
		return &store.InvalidArgumentError{Field: "range", Detail: fmt.Sprintf("[%d, %d) is not a range of at most %d log positions", start, end, maxLogRange)}
	}
	return nil
}

// LogLeaves returns the leaf values (sealed runs' terminal hashes) at log
// indexes start to end-1, for the tlog-tiles entry bundles; a position the
// log does not hold is a store.NotFoundError-class error, never skipped.
func (s *Store) LogLeaves(ctx context.Context, start, end uint64) ([]store.Digest, error) {
	if err := logRange(start, end); err != nil {
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
	if err := logRange(start, end); err != nil {
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
	out := make([]store.Digest, 0, end-start)
	for rows.Next() {
		var idx int64
		var h []byte
		if err := rows.Scan(&idx, &h); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		want := start + uint64(len(out))
		if idx < 0 || uint64(idx) != want {
			return nil, &store.NotFoundError{What: fmt.Sprintf("%s %d", what, want)}
		}
		if len(h) != 32 {
			return nil, &store.CorruptError{Detail: fmt.Sprintf("%s %d is %d bytes", what, idx, len(h))}
		}
		out = append(out, store.Digest(h))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if uint64(len(out)) != end-start {
		return nil, &store.NotFoundError{What: fmt.Sprintf("%s %d", what, start+uint64(len(out)))}
	}
	return out, nil
}
