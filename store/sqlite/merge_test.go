package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestMerge_DuplicateKeyIsCorrupt: a (tenant, run, seq) key stored twice,
// which only a file changed behind the journal's back can hold, makes the
// merge of the hot keys fail. The appends that hit it get a CorruptError
// naming the key (store.ErrCorrupt), not a bare UNIQUE constraint failure,
// and the file is left exactly as it was; verify --all, before any append,
// names the key too rather than calling the file sound.
func TestMerge_DuplicateKeyIsCorrupt(t *testing.T) {
	tests := []struct {
		name string
		sql  string // ?1 is the run
	}{
		{"hot key copied into record_keys",
			`INSERT INTO record_keys(tenant, run, seq, id, n) SELECT tenant, run, seq, id, n FROM record_keys_hot WHERE run = ?1 AND seq = 2`},
		{"hot key stored twice in record_keys_hot",
			`INSERT INTO record_keys_hot(id, tenant, run, seq, n) SELECT id + 1000, tenant, run, seq, n FROM record_keys_hot WHERE run = ?1 AND seq = 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "j.db")
			// Keys: the run's seqs 1, 2 and 3-4, the other run's seq 1;
			// the next append's key makes five, and the merge is due.
			s := open(t, path, Options{mergeKeysAt: 5})
			run, other := store.NewRunID(), store.NewRunID()
			for _, batch := range [][]store.Append{
				{note(run, "a")}, {note(run, "b")}, {note(run, "c"), note(run, "d")}, {note(other, "x")},
			} {
				if _, err := s.Append(ctx, 1, batch); err != nil {
					t.Fatal(err)
				}
			}
			if cold, hot, _, _, _ := keyCounts(t, path); cold != 0 || hot != 4 {
				t.Fatalf("set-up: %d cold, %d hot keys; want 4 hot", cold, hot)
			}
			tamper(t, path, tt.sql, run.String())
			before := dumpJournal(t, path)

			// verify --all must not call the file sound: the key it
			// holds twice stops every append from here on.
			c, err := s.Checker(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := store.VerifyAll(ctx, c, nil)
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			if sum.LogOK || !strings.Contains(sum.LogError, "two record keys") || !strings.Contains(sum.LogError, run.String()) {
				t.Fatalf("verify --all after the tamper: log ok %v, %q; want the duplicate key of run %s named", sum.LogOK, sum.LogError, run)
			}

			for i := range 2 { // the merge stays due: every later append meets it
				_, err := s.Append(ctx, 1, []store.Append{note(other, fmt.Sprint("y", i))})
				var ce *store.CorruptError
				if !errors.Is(err, store.ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("append %d after the tamper: %v; want a CorruptError", i, err)
				}
				if ce.Run != run || ce.Seq != 2 || !strings.Contains(ce.Detail, "two record keys") {
					t.Fatalf("append %d: %+v; want the duplicate key named: run %s seq 2", i, ce, run)
				}
			}
			if after := dumpJournal(t, path); after != before {
				t.Fatalf("the failed merges changed the file:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// dumpJournal reads the rows of records, runs and both key tables, in a
// fixed order, as one string.
func dumpJournal(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	for _, q := range []string{
		`SELECT id, tenant, run, seq, hex(hash) FROM records ORDER BY id`,
		`SELECT tenant, run, head_seq, hex(head_hash) FROM runs ORDER BY tenant, run`,
		`SELECT tenant, run, seq, id, n FROM record_keys ORDER BY tenant, run, seq`,
		`SELECT id, tenant, run, seq, n FROM record_keys_hot ORDER BY id`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		b.WriteString("--\n")
	}
	return b.String()
}
