package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/runseal/runseal/store"
)

// A record is found by its (tenant, run, seq) key through one of two tables,
// never through an index of the records table:
//
//   - record_keys_hot holds the keys of the records appended since the last
//     merge, in the order of their records' ids (its rowid is the id of a
//     key's last record), with no index. Ids only grow, so a commit's keys
//     land at the table's end: a commit of N appenders on N runs writes the
//     last page or two of it, however many keys it holds. Keyed by (tenant,
//     run, seq), as schema version 5 had it, the same commit scattered its N
//     keys over every page of the table, and those pages measured at 64
//     single-record appenders as about a fifth of the bytes a record cost.
//     A read scans the whole table for its run's keys: it holds about
//     mergeKeysAt rows at most (up to twice that for a while after a group
//     whose merge rolled back: the writer's count restarts at the merge,
//     not at its commit, so the next merge comes a threshold later). The scan is neither cut short nor bounded to
//     a range of ids: a key written behind the journal's back, anywhere in
//     the table, over the run's records must still be met (a repeat);
//   - record_keys holds every other key, keyed by (tenant, run, seq). The
//     writer moves the hot keys into it in bulk (mergeKeysIfDue) once about
//     mergeKeysAt have gathered, so each of its leaves is rewritten once
//     for many commits instead of once for each: with every appender on a
//     run of its own, an index keyed (tenant, run, seq) costs each commit
//     one leaf page per run, which measured at 64 appenders as most of the
//     pages a commit wrote and about a third of the throughput.
//
// A key row covers a range of a run's records that an append wrote
// together: n records, the last of them at (seq, id), the others at the n-1
// seqs and ids before, consecutive in both (one writer inserts a group's
// rows one after another, so SQLite gives them consecutive ids). An append
// of 16 records costs one key, not 16.
//
// Invariants: every record row the journal wrote is covered by exactly one
// key, in one of the two tables (an append writes its rows and keys in its
// transaction; a merge moves keys in one transaction); a key's (tenant,
// run, seq) is unique across both tables, and the ranges of a run are
// disjoint, because an append's first seq is its run's head plus one,
// decided in the same transaction under the single writer (the run's head
// in runs is the authority, as it was with the index). record_keys' primary
// key checks that uniqueness as each merge moves keys in; record_keys_hot's
// rowid, that no two keys end at one record. Reads take the union of the
// two tables in one snapshot (keyedRecords), and join a key only to rows
// that agree with it on tenant, run and seq, so a key edited to point
// elsewhere, or a second key over a record, shows as a gap or a repeat in
// the chain, which readers refuse.

// mergeKeysAt is how many hot key rows the writer lets gather before it moves
// them into record_keys. A merge rewrites about one leaf of record_keys for
// each run it holds keys of, so more keys per merge cost fewer bytes per
// record; every read of a run scans the hot table, so more cost each read
// more (BenchmarkReadRun_HotKeys: about 0.2 us of CPU per hot key on a
// 2-core machine, against about 270 us for the whole read of a run of 16
// records with none, its statements prepared (stmts.go); about 530 us at
// 1536 hot keys, what the read cost with none before it was prepared:
// medians of alternating runs, load 4-6). Measured at 64 appenders of one record each (store bench,
// 50,000 records, alternating, load 8-9): bytes written per record 3,020
// with schema version 5's hot table keyed by seq at 768, 2,658 with the
// hot table in id order at 768, 2,280 at 1536 (the plain batched
// ceiling's: about 1,300).
const mergeKeysAt = 1536

// Key statements: one hot key, rowsPerStmt of them, and the merge.
const (
	qInsertKey   = `INSERT INTO record_keys_hot(tenant, run, seq, id, n) VALUES(?,?,?,?,?)`
	qMergeKeys   = `INSERT INTO record_keys(tenant, run, seq, id, n) SELECT tenant, run, seq, id, n FROM record_keys_hot ORDER BY tenant, run, seq`
	qClearHot    = `DELETE FROM record_keys_hot`
	qCountHotKey = `SELECT count(*) FROM record_keys_hot`
)

var qInsertKeys = `INSERT INTO record_keys_hot(tenant, run, seq, id, n) VALUES ` + repeatRows("(?,?,?,?,?)", rowsPerStmt)

// keyedRecords is a query over the records covered by the keys that match
// where, in both key tables: the UNION ALL of the same SELECT over each,
// with k the key and r the record row. The caller appends ORDER BY and
// LIMIT, ordering by k.seq and then r.id (in that order, after any other
// column of the key): the record_keys arm delivers that order without a
// sort (its primary key, then a range of rowids), the record_keys_hot arm
// sorts the few keys of its scan that match, and SQLite merges the two. where's
// placeholders appear twice: pass its arguments twice (twice).
func keyedRecords(cols, where string) string {
	// Each arm reads its keys first and each key's records by their range
	// of rowids: CROSS JOIN fixes the order and the unary + keeps r's
	// tenant and run from being indexed. Free to choose, SQLite's planner
	// scans the hot table (it has no index) and then, rather than take a
	// key's range of rowids, builds an automatic index of every record on
	// (tenant, run) for each read (TestKeyedRecords_PlanReadsRecordsByRowid).
	arm := func(table string) string {
		return `SELECT ` + cols + ` FROM ` + table + ` k CROSS JOIN records r ON r.id BETWEEN k.id - k.n + 1 AND k.id
	AND +r.tenant = k.tenant AND +r.run = k.run AND r.seq = k.seq - (k.id - r.id) WHERE ` + where
	}
	return arm("record_keys") + "\nUNION ALL\n" + arm("record_keys_hot")
}

// twice repeats args, for a keyedRecords query.
func twice(args ...any) []any { return append(append(make([]any, 0, 2*len(args)), args...), args...) }

// recordKeys appends to keys the key rows (tenant, run, seq, id, n) of
// records inserted one after another: recs[k] of run runs[k] at id ids[k].
// Neighbours of one run with consecutive seqs and ids share a row.
func recordKeys(keys []any, tenant string, recs []store.Prepared, runs []string, ids []int64) []any {
	for k := 0; k < len(recs); {
		j := k + 1
		for j < len(recs) && runs[j] == runs[k] && recs[j].Seq == recs[j-1].Seq+1 && ids[j] == ids[j-1]+1 {
			j++
		}
		keys = append(keys, tenant, runs[k], int64(recs[j-1].Seq), ids[j-1], int64(j-k))
		k = j
	}
	return keys
}

// insertKeys writes hot key rows (recordKeys) of records just inserted.
func (s *Store) insertKeys(ctx context.Context, tx *sql.Tx, keys []any) error {
	if _, err := s.execRows(ctx, tx, qInsertKey, qInsertKeys, 5, keys); err != nil {
		return fmt.Errorf("insert %d record keys: %w", len(keys)/5, err)
	}
	s.hotKeys += len(keys) / 5
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
		return s.mergeFailed(ctx, tx, err)
	}
	if _, err := s.txExec(ctx, tx, qClearHot); err != nil {
		return fmt.Errorf("merge record keys: %w", err)
	}
	s.hotKeys = 0
	return nil
}

// duplicateKeyQuery is a query for the first (tenant, run, seq) that two
// key rows share, two hot keys or a hot key and one of record_keys, among
// the keys that where (a condition on tenant, or empty) admits.
func duplicateKeyQuery(where string) string {
	return `SELECT tenant, run, seq FROM (
	SELECT tenant, run, seq FROM record_keys_hot
	UNION ALL
	SELECT k.tenant, k.run, k.seq FROM record_keys_hot h JOIN record_keys k ON k.tenant = h.tenant AND k.run = h.run AND k.seq = h.seq)
` + where + ` GROUP BY tenant, run, seq HAVING count(*) > 1 ORDER BY tenant, run, seq LIMIT 1`
}

// qDuplicateKey finds a key stored twice in the whole file (a merge moves
// every tenant's keys); qTenantDuplicateKey in one tenant's keys.
var (
	qDuplicateKey       = duplicateKeyQuery("")
	qTenantDuplicateKey = duplicateKeyQuery("WHERE tenant = ?")
)

// mergeFailed explains err, the failure of a merge's move of the hot keys
// (qMergeKeys) in tx. A key stored twice is the likely cause, and only a
// file changed behind the journal's back can hold one (see the invariants
// above): it is reported as corruption naming the key, not as the raw
// UNIQUE failure of record_keys' primary key. The writer's transaction
// rolls back either way, so nothing stored changes, and every later merge
// fails the same way until the file is repaired.
func (s *Store) mergeFailed(ctx context.Context, tx *sql.Tx, err error) error {
	var tenant, run string
	var seq int64
	if qerr := tx.QueryRowContext(ctx, qDuplicateKey).Scan(&tenant, &run, &seq); qerr != nil {
		return fmt.Errorf("merge record keys: %w", err)
	}
	return duplicateKeyError(tenant, run, seq, fmt.Sprintf("the merge of the hot keys is refused: %v", err))
}

// duplicateKeyError is the corruption of a key stored twice, at (tenant,
// run, seq), with what it stopped.
func duplicateKeyError(tenant, run string, seq int64, stopped string) error {
	detail := fmt.Sprintf("tenant %q has two record keys for this seq (in record_keys_hot and record_keys, or twice in record_keys_hot); %s", tenant, stopped)
	id, perr := store.ParseRunID(run)
	if perr != nil {
		return &store.CorruptError{Detail: fmt.Sprintf("stored run id %q, seq %d: %s", run, seq, detail)}
	}
	return &store.CorruptError{Run: id, Seq: store.Seq(seq), Detail: detail}
}

// hotKeysTable is record_keys_hot since schema version 6: the rowid is the
// id of the key's last record, so keys are stored in the order they are
// written (see above).
const hotKeysTable = `CREATE TABLE IF NOT EXISTS record_keys_hot(
	id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, run TEXT NOT NULL, seq INTEGER NOT NULL, n INTEGER NOT NULL) STRICT;
`

// migrateHotKeys rebuilds a record_keys_hot of schema version 5, keyed by
// (tenant, run, seq), as hotKeysTable, with the same key rows. It runs in
// the migration's transaction, so a file is either migrated whole or not
// at all.
func migrateHotKeys(ctx context.Context, tx *sql.Tx) error {
	var rowid int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('record_keys_hot') WHERE name = 'id' AND pk = 1`).Scan(&rowid); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	if rowid == 1 {
		return nil
	}
	for _, q := range []string{
		`ALTER TABLE record_keys_hot RENAME TO record_keys_hot_v5`,
		hotKeysTable,
		`INSERT INTO record_keys_hot(id, tenant, run, seq, n) SELECT id, tenant, run, seq, n FROM record_keys_hot_v5 ORDER BY id`,
		`DROP TABLE record_keys_hot_v5`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("rebuild record_keys_hot: %w", err)
		}
	}
	return nil
}

// migrateRecordKeys rebuilds a records table that still carries its
// (tenant, run, seq) key as a UNIQUE constraint (schema version 4 and
// before): the rows keep their ids, every key moves to record_keys (one
// row per record), and the
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
		`INSERT INTO record_keys(tenant, run, seq, id, n) SELECT tenant, run, seq, id, 1 FROM records ORDER BY tenant, run, seq`,
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
