package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/storetest"
)

// TestConformanceKeysMerging runs the contract with the hot keys merged
// into record_keys after every two, so that the records of almost every
// run the suite reads have their keys split between the two tables: every
// read path must take their union, in order, in one snapshot.
func TestConformanceKeysMerging(t *testing.T) {
	for _, oneByOne := range []bool{false, true} {
		t.Run(fmt.Sprintf("oneByOne=%v", oneByOne), func(t *testing.T) {
			storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
				clk := storetest.NewFakeClock()
				s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "j.db"), Options{Now: clk.Now, mergeKeysAt: 2, oneByOne: oneByOne})
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { s.Close() })
				return s, clk
			}})
		})
	}
}

// queryFile reads one row of one column from the file at path into dst,
// on a connection of its own.
func queryFile(t testing.TB, path, query string, dst any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(query).Scan(dst); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// keyCounts reads how many key rows each table holds, how many records
// there are and how many the keys cover, and how many records are covered
// by other than exactly one key.
func keyCounts(t testing.TB, path string) (cold, hot, records, covered, notOnce int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const keys = `(SELECT tenant, run, seq, id, n FROM record_keys UNION ALL SELECT tenant, run, seq, id, n FROM record_keys_hot)`
	for q, dst := range map[string]*int{
		`SELECT count(*) FROM record_keys`:        &cold,
		`SELECT count(*) FROM record_keys_hot`:    &hot,
		`SELECT count(*) FROM records`:            &records,
		`SELECT coalesce(sum(n), 0) FROM ` + keys: &covered,
		`SELECT count(*) FROM records r WHERE (SELECT count(*) FROM ` + keys + ` k
			WHERE r.id BETWEEN k.id - k.n + 1 AND k.id AND r.tenant = k.tenant AND r.run = k.run AND r.seq = k.seq - (k.id - r.id)) != 1`: &notOnce,
	} {
		if err := db.QueryRow(q).Scan(dst); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return
}

// TestKeysMerge_EveryRecordKeyedOnce appends from several writers at once
// with a small merge threshold, across reopens, and checks the invariant
// reads rely on: every record has exactly one key, in one of the tables,
// pointing at it; the hot table is emptied by each merge; and each run
// reads back whole.
func TestKeysMerge_EveryRecordKeyedOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	runs := make([]store.RunID, 6)
	for i := range runs {
		runs[i] = store.NewRunID()
	}
	for round := range 3 {
		s := open(t, path, Options{mergeKeysAt: 7})
		errs := make(chan error, len(runs))
		for i, run := range runs {
			go func() {
				for k := range 5 {
					batch := []store.Append{note(run, fmt.Sprint(round, k))}
					if i%2 == 1 {
						batch = append(batch, note(run, "second"))
					}
					if _, err := s.Append(ctx, 1, batch); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range runs {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		cold, hot, records, covered, notOnce := keyCounts(t, path)
		if covered != records || notOnce != 0 {
			t.Fatalf("round %d: %d cold + %d hot keys cover %d of %d records; %d records not keyed exactly once", round, cold, hot, covered, records, notOnce)
		}
		if cold == 0 || hot >= 7+len(runs)*2 {
			t.Fatalf("round %d: %d cold, %d hot keys: the hot keys were not merged", round, cold, hot)
		}
	}
	s := open(t, path, Options{})
	for i, run := range runs {
		recs, err := s.Read(ctx, run, 1)
		want := 3 * 5 * (1 + i%2)
		if err != nil || len(recs) != want {
			t.Fatalf("run %d reads %d records (%v), want %d", i, len(recs), err, want)
		}
	}
}

// v4Records makes a file's records table what schema version 4 wrote: the
// (tenant, run, seq) key a UNIQUE constraint of the table, no key tables.
const v4Records = `
CREATE TABLE records_old(
	id INTEGER PRIMARY KEY,
	tenant TEXT NOT NULL, run TEXT NOT NULL, seq INTEGER NOT NULL,
	kind TEXT NOT NULL, case_id TEXT, effect_key BLOB,
	prev_hash BLOB NOT NULL, hash BLOB NOT NULL, raw BLOB NOT NULL,
	UNIQUE(tenant, run, seq)) STRICT;
INSERT INTO records_old SELECT id, tenant, run, seq, kind, case_id, effect_key, prev_hash, hash, raw FROM records;
DROP TABLE records;
ALTER TABLE records_old RENAME TO records;
CREATE UNIQUE INDEX records_effect ON records(tenant, run, effect_key) WHERE kind = 'EffectStarted';
CREATE INDEX records_case ON records(tenant, case_id, id) WHERE case_id IS NOT NULL;
DROP TABLE record_keys;
DROP TABLE record_keys_hot;
UPDATE meta SET value = '4' WHERE key = 'schema';`

// scanAll reads every record of the tenant through ScanRuns, as an export
// does.
func scanAll(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	var pg store.RunsPage
	after := store.RunCursor{}
	for {
		if err := s.ScanRuns(context.Background(), &pg, after, 3, 1<<20); err != nil {
			t.Fatal(err)
		}
		for _, r := range pg.Runs {
			for _, rec := range r.Records {
				out = append(out, fmt.Sprintf("%s/%d/%v/%x/%x", r.Run, rec.Seq, rec.Concluded, rec.Hash, rec.Raw))
			}
		}
		if pg.Done {
			return out
		}
		after = pg.Next
	}
}

// TestSchemaFourMigratesRecordKeys: a file whose records table still
// carries the (tenant, run, seq) key as its own index (schema 4) is
// rebuilt when opened: the index is gone, every record keeps its id and
// reads back, the scan an export makes is the same, a sealed run still
// verifies to its leaf, and the effect key still refuses a duplicate.
func TestSchemaFourMigratesRecordKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	sealedRun, open1 := store.NewRunID(), store.NewRunID()
	effect := store.Digest{7}
	if _, err := s.Append(ctx, 1, []store.Append{
		note(sealedRun, "a"),
		{Run: sealedRun, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
	}); err != nil {
		t.Fatal(err)
	}
	leaf, err := s.Seal(ctx, sealedRun, 1, "succeeded")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, 1, []store.Append{note(open1, "b"), {Run: open1, Kind: store.KindEffectStarted, EffectKey: &effect, Fields: []byte(`{"attempt":1}`)}}); err != nil {
		t.Fatal(err)
	}
	before := scanAll(t, s)
	s.Close()
	tamper(t, path, v4Records)

	s = open(t, path, Options{})
	if got := scanAll(t, s); !slices.Equal(got, before) {
		t.Fatalf("scan after migration:\n%v\nbefore:\n%v", got, before)
	}
	if d, err := s.Verify(ctx, sealedRun); err != nil || d != leaf {
		t.Fatalf("sealed run after migration: %x, %v; want leaf %x", d, err, leaf)
	}
	if _, err := s.Append(ctx, 1, []store.Append{{Run: open1, Kind: store.KindEffectStarted, EffectKey: &effect, Fields: []byte(`{"attempt":1}`)}}); !errors.As(err, new(*store.DuplicateEffectError)) {
		t.Fatalf("duplicate effect after migration: %v", err)
	}
	if recs, err := s.Append(ctx, 1, []store.Append{note(open1, "c")}); err != nil || recs[0].Seq != 3 {
		t.Fatalf("append after migration: %+v, %v", recs, err)
	}
	s.Close()
	var autoindexes int
	var version string
	queryFile(t, path, `SELECT count(*) FROM sqlite_master WHERE tbl_name = 'records' AND name LIKE 'sqlite_autoindex%'`, &autoindexes)
	queryFile(t, path, `SELECT value FROM meta WHERE key = 'schema'`, &version)
	if autoindexes != 0 || version != fmt.Sprint(SchemaVersion) {
		t.Fatalf("after migration: %d autoindexes on records, schema %s", autoindexes, version)
	}
	if cold, hot, records, covered, notOnce := keyCounts(t, path); cold != 4 || hot != 1 || records != 5 || covered != 5 || notOnce != 0 {
		t.Fatalf("keys after migration: %d cold, %d hot, %d records, %d covered, %d not keyed once", cold, hot, records, covered, notOnce)
	}
}

// TestRecordKeys_OneRowPerConsecutiveRange: neighbours share a key row only
// when they are of one run and consecutive in both seq and id.
func TestRecordKeys_OneRowPerConsecutiveRange(t *testing.T) {
	rec := func(seq store.Seq) store.Prepared {
		return store.Prepared{Record: store.Record{Body: store.Body{Seq: seq}}}
	}
	tests := []struct {
		name string
		recs []store.Prepared
		runs []string
		ids  []int64
		want []any
	}{
		{"one append", []store.Prepared{rec(4), rec(5), rec(6)}, []string{"a", "a", "a"}, []int64{10, 11, 12},
			[]any{"t", "a", int64(6), int64(12), int64(3)}},
		{"runs interleaved", []store.Prepared{rec(1), rec(7), rec(2)}, []string{"a", "b", "a"}, []int64{10, 11, 12},
			[]any{"t", "a", int64(1), int64(10), int64(1), "t", "b", int64(7), int64(11), int64(1), "t", "a", int64(2), int64(12), int64(1)}},
		{"two runs in turn", []store.Prepared{rec(1), rec(2), rec(1), rec(2)}, []string{"a", "a", "b", "b"}, []int64{1, 2, 3, 4},
			[]any{"t", "a", int64(2), int64(2), int64(2), "t", "b", int64(2), int64(4), int64(2)}},
		{"a gap in ids", []store.Prepared{rec(1), rec(2)}, []string{"a", "a"}, []int64{1, 3},
			[]any{"t", "a", int64(1), int64(1), int64(1), "t", "a", int64(2), int64(3), int64(1)}},
		{"a gap in seqs", []store.Prepared{rec(1), rec(3)}, []string{"a", "a"}, []int64{1, 2},
			[]any{"t", "a", int64(1), int64(1), int64(1), "t", "a", int64(3), int64(2), int64(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := recordKeys(nil, "t", tt.recs, tt.runs, tt.ids); !slices.Equal(got, tt.want) {
				t.Fatalf("recordKeys = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAppendAtomic_OneKeyPerAppend: the one-run path (AppendAtomic) keys
// its records as the group path does, one row for the append's range,
// and the records read back through that key.
func TestAppendAtomic_OneKeyPerAppend(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var batch []store.Append
	for i := range 16 {
		batch = append(batch, note(run, fmt.Sprint(i)))
	}
	if _, err := s.Atomic().AppendAtomic(ctx, run, l.Epoch, func(context.Context, store.AtomicTx) ([]store.Append, error) {
		return batch, nil
	}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Read(ctx, run, 1)
	if err != nil || len(recs) != 16 {
		t.Fatalf("Read = %d records, %v; want 16", len(recs), err)
	}
	cold, hot, records, covered, notOnce := keyCounts(t, path)
	if cold+hot != 1 || records != 16 || covered != 16 || notOnce != 0 {
		t.Fatalf("key rows %d+%d for %d records (covered %d, not once %d); want 1 row covering 16", cold, hot, records, covered, notOnce)
	}
}

// TestKeysMerge_HotCountSurvivesReopen: the writer's count of hot keys,
// which says when to merge, starts from the table when a file is opened.
// Were it to start at 0, every reopen would let up to mergeKeysAt-1 more
// keys gather in record_keys_hot before a merge, and a process reopened
// often would keep a hot table many times the size each commit is meant
// to rewrite.
func TestKeysMerge_HotCountSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	run := store.NewRunID()
	const at = 4
	for i := range at - 1 {
		s := open(t, path, Options{mergeKeysAt: at})
		if _, err := s.Append(ctx, 1, []store.Append{note(run, fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if cold, hot, _, _, _ := keyCounts(t, path); cold != 0 || hot != at-1 {
		t.Fatalf("before the merge: %d cold, %d hot keys, want 0 and %d", cold, hot, at-1)
	}
	s := open(t, path, Options{mergeKeysAt: at})
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "due")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if cold, hot, records, covered, notOnce := keyCounts(t, path); cold != at || hot != 0 || covered != records || notOnce != 0 {
		t.Fatalf("the append that brought the hot keys to %d left %d cold and %d hot keys (%d of %d records covered, %d not once): the count restarted on reopen", at, cold, hot, covered, records, notOnce)
	}
}

// v5HotKeys makes a file's record_keys_hot what schema version 5 wrote:
// keyed by (tenant, run, seq), without a rowid.
const v5HotKeys = `
CREATE TABLE hot_old(
	tenant TEXT NOT NULL, run TEXT NOT NULL, seq INTEGER NOT NULL, id INTEGER NOT NULL, n INTEGER NOT NULL,
	PRIMARY KEY(tenant, run, seq)) STRICT, WITHOUT ROWID;
INSERT INTO hot_old SELECT tenant, run, seq, id, n FROM record_keys_hot;
DROP TABLE record_keys_hot;
ALTER TABLE hot_old RENAME TO record_keys_hot;
UPDATE meta SET value = '5' WHERE key = 'schema';`

// TestSchemaFiveMigratesHotKeys: a file of schema version 5, with keys in
// both tables, is migrated when opened: record_keys_hot becomes the table
// in id order with the same key rows, every record of every run reads back
// as before (Read, and the scan an export makes), appends go on from each
// run's head, and a later merge moves the migrated keys like any other.
func TestSchemaFiveMigratesHotKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	runs := make([]store.RunID, 5)
	for i := range runs {
		runs[i] = store.NewRunID()
	}
	const at = 40
	s := open(t, path, Options{mergeKeysAt: at})
	for round := range 12 { // 12 rounds of 5 appends: one merge, then hot keys left
		for i, run := range runs {
			batch := []store.Append{note(run, fmt.Sprint(round))}
			if i%2 == 1 {
				batch = append(batch, note(run, "second"))
			}
			if _, err := s.Append(ctx, 1, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := scanAll(t, s)
	s.Close()
	cold0, hot0, records0, _, _ := keyCounts(t, path)
	if cold0 == 0 || hot0 == 0 {
		t.Fatalf("set-up: %d cold and %d hot keys; want both", cold0, hot0)
	}
	tamper(t, path, v5HotKeys)

	s = open(t, path, Options{mergeKeysAt: at})
	if got := scanAll(t, s); !slices.Equal(got, before) {
		t.Fatalf("scan after migration:\n%v\nbefore:\n%v", got, before)
	}
	for i, run := range runs {
		recs, err := s.Read(ctx, run, 1)
		if want := 12 * (1 + i%2); err != nil || len(recs) != want {
			t.Fatalf("run %d after migration reads %d records (%v), want %d", i, len(recs), err, want)
		}
	}
	if cold, hot, records, covered, notOnce := keyCounts(t, path); cold != cold0 || hot != hot0 || records != records0 || covered != records || notOnce != 0 {
		t.Fatalf("keys after migration: %d cold, %d hot (want %d, %d), %d records, %d covered, %d not keyed once", cold, hot, cold0, hot0, records, covered, notOnce)
	}
	var rowid int
	var version string
	queryFile(t, path, `SELECT count(*) FROM pragma_table_info('record_keys_hot') WHERE name = 'id' AND pk = 1`, &rowid)
	queryFile(t, path, `SELECT value FROM meta WHERE key = 'schema'`, &version)
	if rowid != 1 || version != fmt.Sprint(SchemaVersion) {
		t.Fatalf("after migration: record_keys_hot keyed by id: %v; schema %s", rowid == 1, version)
	}
	// Enough appends for a merge of the migrated keys with new ones.
	for round := range at / len(runs) {
		for _, run := range runs {
			if recs, err := s.Append(ctx, 1, []store.Append{note(run, fmt.Sprint("after", round))}); err != nil || recs[0].Seq < 13 {
				t.Fatalf("append after migration: %+v, %v", recs, err)
			}
		}
	}
	s.Close()
	cold, hot, records, covered, notOnce := keyCounts(t, path)
	if cold <= cold0 || hot >= at || covered != records || notOnce != 0 {
		t.Fatalf("after a merge: %d cold, %d hot keys, %d records, %d covered, %d not keyed once", cold, hot, records, covered, notOnce)
	}
	s = open(t, path, Options{})
	for i, run := range runs {
		recs, err := s.Read(ctx, run, 1)
		if want := 12*(1+i%2) + at/len(runs); err != nil || len(recs) != want {
			t.Fatalf("run %d reads %d records (%v), want %d", i, len(recs), err, want)
		}
	}
}

// TestKeyedRecords_PlanReadsRecordsByRowid: every query over keyedRecords
// reads its keys, the cold ones by their primary key, and each key's
// records by their range of rowids. Left to itself, SQLite's planner read
// the hot table's keys and then built an automatic index of the whole
// records table on (tenant, run) for every read: a read of a run of one
// record cost a pass over every record of the file.
// queryPlan is the detail of each step of SQLite's plan for query, as a
// reader of s would run it.
func queryPlan(t *testing.T, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.rdb.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

func TestKeyedRecords_PlanReadsRecordsByRowid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	run := store.NewRunID()
	if _, err := s.Append(context.Background(), 1, []store.Append{note(run, "a")}); err != nil {
		t.Fatal(err)
	}
	queries := map[string]struct {
		query string
		args  []any
	}{
		"read":   {qReadRun, append(twice("default", run.String(), 1, 1), 10)},
		"epochs": {`SELECT coalesce(max(e), 0) FROM (` + qRunEpochs + `)`, twice("default", run.String())},
		"scan":   {qScanRecords, append(twice("default", "", 0, "", 0), 10)},
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			plan := queryPlan(t, s, q.query, q.args...)
			var byRowid, coldByKey int
			for _, d := range plan {
				switch {
				case strings.Contains(d, "AUTOMATIC"), strings.HasPrefix(d, "SCAN r"):
					t.Errorf("plan step %q reads records other than by the keys' rowid ranges; plan:\n%s", d, strings.Join(plan, "\n"))
				case strings.HasPrefix(d, "SEARCH r USING INTEGER PRIMARY KEY"):
					byRowid++
				case strings.HasPrefix(d, "SEARCH k USING PRIMARY KEY"):
					coldByKey++
				}
			}
			if byRowid != 2 || coldByKey != 1 {
				t.Errorf("plan reads records by rowid in %d arms (want 2), cold keys by their key in %d (want 1):\n%s", byRowid, coldByKey, strings.Join(plan, "\n"))
			}
		})
	}
}

// TestAppendBulk_MergesHotKeys: a bulk append (what a restore writes
// through) merges the hot keys when they are due, as a group of Appends
// does. It did not: a restore left every key it wrote in record_keys_hot,
// which every read of a run scans whole.
func TestAppendBulk_MergesHotKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	const at = 8
	s := open(t, path, Options{mergeKeysAt: at})
	var runs []store.RunID
	for range 5 {
		var apps []store.BulkAppend
		for range 6 {
			run := store.NewRunID()
			runs = append(runs, run)
			apps = append(apps, store.BulkAppend{Epoch: 1, Batch: []store.Append{note(run, "a"), note(run, "b")}})
		}
		if _, err := s.AppendBulk(ctx, apps); err != nil {
			t.Fatal(err)
		}
	}
	cold, hot, records, covered, notOnce := keyCounts(t, path)
	if hot >= at || cold+hot != len(runs) || covered != records || notOnce != 0 {
		t.Fatalf("after 5 bulk appends of 6 runs: %d cold, %d hot keys (merge due at %d), %d of %d records covered, %d not keyed once", cold, hot, at, covered, records, notOnce)
	}
	for _, run := range runs {
		if recs, err := s.Read(ctx, run, 1); err != nil || len(recs) != 2 {
			t.Fatalf("run %s reads %d records, %v", run, len(recs), err)
		}
	}
}
