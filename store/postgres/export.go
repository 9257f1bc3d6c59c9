package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runseal/runseal/store"
)

// ScanRuns implements store.BulkReader with two range scans in one
// REPEATABLE READ, read-only transaction: the records after the cursor in
// the order of the (tenant, run, seq) primary key (a row comparison, which
// the index serves from the cursor on), then the run rows of the range of
// runs they span. The byte budget is applied by the server (a running sum
// of octet_length, which reads no TOASTed value), so a page of large
// records does not send the records past it only for them to be dropped.
// Columns are read in the binary format, without a copy per value beyond
// the page's own.
func (s *Store) ScanRuns(ctx context.Context, pg *store.RunsPage, after store.RunCursor, limit, maxBytes int) error {
	if err := store.ValidateLimit(limit); err != nil {
		return err
	}
	if maxBytes < 1 {
		return &store.InvalidArgumentError{Field: "max_bytes", Detail: fmt.Sprintf("%d is not positive", maxBytes)}
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	cursor := ""
	if after != (store.RunCursor{}) {
		cursor = after.Run.String()
	}
	pg.Begin(after)
	err := s.scanRuns(ctx, pg, after, cursor, limit, maxBytes)
	return s.readErr(fmt.Sprintf("scan runs after %s/%d", cursor, after.Seq), err)
}

func (s *Store) scanRuns(ctx context.Context, pg *store.RunsPage, after store.RunCursor, cursor string, limit, maxBytes int) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	sch := pgx.Identifier{s.schema}.Sanitize()
	rows, err := tx.Query(ctx, `SELECT run, seq, kind = 'RunConcluded', hash, raw FROM (
	SELECT run, seq, kind, hash, raw,
		sum(octet_length(raw)) OVER (ORDER BY run, seq ROWS UNBOUNDED PRECEDING) - octet_length(raw) AS before
	FROM `+sch+`.records WHERE tenant = $1 AND (run, seq) > ($2, $3) ORDER BY run, seq LIMIT $4) r
WHERE before < $5 ORDER BY run, seq`, s.tenant, cursor, int64(after.Seq), limit, int64(maxBytes))
	if err != nil {
		return err
	}
	n := 0
	for rows.Next() {
		v := rows.RawValues()
		f := rows.FieldDescriptions()
		seq, err := int8Value(f[1], v[1])
		if err != nil {
			rows.Close()
			return err
		}
		concluded, err := boolValue(f[2], v[2])
		if err != nil {
			rows.Close()
			return err
		}
		if f[3].Format != pgx.BinaryFormatCode || f[4].Format != pgx.BinaryFormatCode {
			rows.Close()
			return fmt.Errorf("records read in the text format")
		}
		if err := pg.Record(v[0], seq, concluded, v[3], v[4]); err != nil {
			rows.Close()
			return err
		}
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	done := pg.Bytes() < maxBytes && n < limit
	q := `SELECT run, head_seq, head_hash, log_index, leaf FROM ` + sch + `.runs WHERE tenant = $1 AND run >= $2 AND run <= $3 ORDER BY run`
	args := []any{s.tenant, cursor, pg.LastRun()}
	if done {
		q, args = `SELECT run, head_seq, head_hash, log_index, leaf FROM `+sch+`.runs WHERE tenant = $1 AND run >= $2 ORDER BY run`, args[:2]
	}
	if rows, err = tx.Query(ctx, q, args...); err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		v := rows.RawValues()
		f := rows.FieldDescriptions()
		seq, err := int8Value(f[1], v[1])
		if err != nil {
			return err
		}
		var idx int64
		if v[3] != nil {
			if idx, err = int8Value(f[3], v[3]); err != nil {
				return err
			}
		}
		if f[2].Format != pgx.BinaryFormatCode || f[4].Format != pgx.BinaryFormatCode {
			return fmt.Errorf("run rows read in the text format")
		}
		if err := pg.Run(v[0], seq, v[2], idx, v[3] != nil, v[4]); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return pg.End(done)
}

// int8Value reads a bigint column in either wire format.
func int8Value(f pgconn.FieldDescription, v []byte) (int64, error) {
	if f.Format == pgx.BinaryFormatCode {
		if len(v) != 8 {
			return 0, fmt.Errorf("column %s: %d bytes for a bigint", f.Name, len(v))
		}
		return int64(binary.BigEndian.Uint64(v)), nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("column %s: %w", f.Name, err)
	}
	return n, nil
}

// boolValue reads a boolean column in either wire format.
func boolValue(f pgconn.FieldDescription, v []byte) (bool, error) {
	switch {
	case len(v) != 1:
		return false, fmt.Errorf("column %s: %d bytes for a boolean", f.Name, len(v))
	case f.Format == pgx.BinaryFormatCode:
		return v[0] == 1, nil
	default:
		return v[0] == 't', nil
	}
}

var _ store.BulkReader = (*Store)(nil)
