package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// A record is found by its (tenant, run, seq) key through one of two tables
// of the same shape, never through an index of the records table:
//
//   - record_keys_hot holds the keys of the records appended since the last
//     merge. It is small, so a commit of N appenders on N runs rewrites a
//     few of its pages, not N;
//   - record_keys holds every other key. The writer moves the hot keys into
//     it in bulk (mergeKeys) once about mergeKeysAt have gathered, so each
//     of its leaves is rewritten once for many commits instead of once for
//     each: with every appender on a run of its own, an index of the
//     records table keyed (tenant, run, seq) costs each commit one leaf
//     page per run, which measured at 64 appenders as most of the pages a
//     commit wrote and about a third of the throughput.
//
// Invariants: every record row the journal wrote has its key in exactly one
// of the two tables (an append writes the row and its hot key in one
// statement group of its transaction; a merge moves keys in one
// transaction); a key is unique in its table, and across the two because
// an append's seq is its run's head plus one, decided in the same
// transaction under the single writer (the run's head in runs is the
// authority, as it was with the index). Reads take the union of the two
// tables in one snapshot (keyedRecords), and join each key to its row only
// where the row agrees on tenant, run and seq, so a key edited to point
// at another row shows as a gap in the chain, which readers refuse.

// mergeKeysAt is how many hot keys the writer lets gather before it moves
// them into record_keys. More makes the hot table's pages, which every
// commit rewrites, more numerous; fewer makes merges more frequent, each
// rewriting about one leaf of record_keys per run. Measured at 64
// appenders of one record, the WAL bytes per record fell from about 6,500
// to 2,800 at 768 (the plain batched ceiling writes about 1,300).
const mergeKeysAt = 768

// Key statements: one hot key, rowsPerStmt of them, and the merge.
const (
	qInsertKey   = `INSERT INTO record_keys_hot(tenant, run, seq, id) VALUES(?,?,?,?)`
	qMergeKeys   = `INSERT INTO record_keys(tenant, run, seq, id) SELECT tenant, run, seq, id FROM record_keys_hot ORDER BY tenant, run, seq`
	qClearHot    = `DELETE FROM record_keys_hot`
	qCountHotKey = `SELECT count(*) FROM record_keys_hot`
)

var qInsertKeys = `INSERT INTO record_keys_hot(tenant, run, seq, id) VALUES ` + repeatRows("(?,?,?,?)", rowsPerStmt)

// keyedRecords is a query over the records whose keys match where, in
// both key tables: the UNION ALL of the same SELECT over each, with k the
// key and r the record row; the caller appends ORDER BY and LIMIT, which
// SQLite applies to the union by merging the two arms, each in its key's
// order. where's placeholders appear twice: pass its arguments twice.
func keyedRecords(cols, where string) string {
	arm := func(table string) string {
		return `SELECT ` + cols + ` FROM ` + table + ` k JOIN records r ON r.id = k.id AND r.tenant = k.tenant AND r.run = k.run AND r.seq = k.seq WHERE ` + where
	}
	return arm("record_keys") + "\nUNION ALL\n" + arm("record_keys_hot")
}

// twice repeats args, for a keyedRecords query.
func twice(args ...any) []any { return append(append(make([]any, 0, 2*len(args)), args...), args...) }

// insertKeys writes the hot keys of records just inserted: keys holds
// (tenant, run, seq, id) for each.
func (s *Store) insertKeys(ctx context.Context, tx *sql.Tx, keys []any) error {
	if _, err := s.execRows(ctx, tx, qInsertKey, qInsertKeys, 4, keys); err != nil {
		return fmt.Errorf("insert %d record keys: %w", len(keys)/4, err)
	}
	s.hotKeys += len(keys) / 4
	return nil
}

// mergeKeysIfDue moves the hot keys into record_keys, inside the writer's
// transaction tx, once mergeKeysAt (s.mergeAt) have gathered. hotKeys only says when:
// a rolled-back transaction can leave it off by a group's keys, which moves
// a merge earlier or later, never loses a key.
func (s *Store) mergeKeysIfDue(ctx context.Context, tx *sql.Tx) error {
	if s.hotKeys < s.mergeAt {
		return nil
	}
	if _, err := s.txExec(ctx, tx, qMergeKeys); err != nil {
		return fmt.Errorf("merge record keys: %w", err)
	}
	if _, err := s.txExec(ctx, tx, qClearHot); err != nil {
		return fmt.Errorf("merge record keys: %w", err)
	}
	s.hotKeys = 0
	return nil
}

// migrateRecordKeys rebuilds a records table that still carries its
// (tenant, run, seq) key as a UNIQUE constraint (schema version 4 and
// before): the rows keep their ids, every key moves to record_keys, and the
// table's other indexes are made again. It runs in the migration's
// transaction, so a file is either migrated whole or not at all.
func migrateRecordKeys(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' AND name LIKE 'sqlite_autoindex_records_%'`).Scan(&n); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	if n == 0 {
		return nil
	}
	table := strings.Replace(recordsTable, "records(", "records_v5(", 1)
	for _, q := range []string{
		table,
		`INSERT INTO records_v5(id, tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw)
			SELECT id, tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw FROM records ORDER BY id`,
		`INSERT INTO record_keys(tenant, run, seq, id) SELECT tenant, run, seq, id FROM records ORDER BY tenant, run, seq`,
		`DROP TABLE records`,
		`ALTER TABLE records_v5 RENAME TO records`,
		recordIndexes,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("rebuild records: %w", err)
		}
	}
	return nil
}
