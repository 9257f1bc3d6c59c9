package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/runseal/runseal/store"
)

// qScanRecords reads a tenant's records after a (run, seq) cursor, in
// (run, seq) order, at most a limit: each arm of the union is a range scan
// of its key table from the cursor, which SQLite merges.
var qScanRecords = keyedRecords(`k.run, k.seq, r.id, r.seq, CAST(iif(r.kind = 'RunConcluded', '1', '0') || r.hash || r.raw AS BLOB)`,
	`k.tenant = ? AND (k.run, k.seq) > (?, ?) AND (r.run, r.seq) > (?, ?)`) + `
ORDER BY 1, 2, 3 LIMIT ?`

// ScanRuns implements store.BulkReader with two range scans in one read
// transaction: the records after the cursor in the order of the (tenant,
// run, seq) keys (a row-value comparison, so the scan starts at the cursor
// instead of filtering from the tenant's first run), then the run rows of
// the range of runs they span. A join would look each run's records up
// again per run row; two ordered scans merged here cost half as much.
func (s *Store) ScanRuns(ctx context.Context, pg *store.RunsPage, after store.RunCursor, limit, maxBytes int) error {
	if err := store.ValidateLimit(limit); err != nil {
		return err
	}
	if maxBytes < 1 {
		return &store.InvalidArgumentError{Field: "max_bytes", Detail: fmt.Sprintf("%d is not positive", maxBytes)}
	}
	// An export reads the whole file once: off the pool's memory map.
	conn, release, err := s.pageCacheConn(ctx)
	if err != nil {
		return fmt.Errorf("scan runs: %w", err)
	}
	defer release()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("scan runs: %w", err)
	}
	defer tx.Rollback()
	cursor := ""
	if after != (store.RunCursor{}) {
		cursor = after.Run.String()
	}
	pg.Begin(after)
	// One column for the kind, the hash and the body: the driver's cost is
	// per column read. It is '1' for a conclusion ('0' else), the hash, then the body
	// (a hash of another length splits it wrongly, and the caller's chain
	// check refuses it).
	rows, err := s.query(ctx, tx, qScanRecords, append(twice(s.tenant, cursor, int64(after.Seq), cursor, int64(after.Seq)), limit)...)
	if err != nil {
		return fmt.Errorf("scan records after %s/%d: %w", cursor, after.Seq, err)
	}
	n, full := 0, false
	var id, rec, leaf, keySeq, rowID sql.RawBytes // the last two: the order's
	var seq int64
	for rows.Next() {
		if err := rows.Scan(&id, &keySeq, &rowID, &seq, &rec); err != nil {
			rows.Close()
			return fmt.Errorf("scan records: %w", err)
		}
		if len(rec) < 1+len(store.Digest{}) {
			rows.Close()
			return &store.CorruptError{Detail: fmt.Sprintf("run %q seq %d: stored hash is not 32 bytes", id, seq)}
		}
		if err := pg.Record(id, seq, rec[0] == '1', rec[1:33], rec[33:]); err != nil {
			rows.Close()
			return err
		}
		if n++; pg.Bytes() >= maxBytes {
			full = true
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("scan records: %w", err)
	}
	done := !full && n < limit
	q := `SELECT run, head_seq, head_hash, log_index, leaf FROM runs WHERE tenant = ? AND run >= ? AND run <= ? ORDER BY run`
	args := []any{s.tenant, cursor, pg.LastRun()}
	if done {
		q, args = `SELECT run, head_seq, head_hash, log_index, leaf FROM runs WHERE tenant = ? AND run >= ? ORDER BY run`, args[:2]
	}
	if rows, err = tx.QueryContext(ctx, q, args...); err != nil {
		return fmt.Errorf("scan run rows from %s: %w", cursor, err)
	}
	defer rows.Close()
	var idx sql.NullInt64
	for rows.Next() {
		if err := rows.Scan(&id, &seq, &rec, &idx, &leaf); err != nil {
			return fmt.Errorf("scan run rows: %w", err)
		}
		if err := pg.Run(id, seq, rec, idx.Int64, idx.Valid, leaf); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("scan run rows: %w", err)
	}
	return pg.End(done)
}

var _ store.BulkReader = (*Store)(nil)
