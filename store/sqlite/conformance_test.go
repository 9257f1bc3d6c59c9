package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/storetest"
)

func harness() storetest.Harness {
	var paths sync.Map // *Store -> its file
	return storetest.Harness{
		Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
			clk := storetest.NewFakeClock()
			path := filepath.Join(tb.TempDir(), "journal.db")
			s, err := Open(context.Background(), path, Options{Now: clk.Now})
			if err != nil {
				tb.Fatalf("open: %v", err)
			}
			paths.Store(s, path)
			tb.Cleanup(func() { s.Close() })
			return s, clk
		},
		// Tamper edits the file through a connection of its own, as
		// anyone who can write the file can.
		Tamper: func(tb testing.TB, j store.Journal, query string, args ...any) {
			tb.Helper()
			path, ok := paths.Load(j)
			if !ok {
				tb.Fatalf("tamper: %T was not opened by this harness", j)
			}
			db, err := sql.Open("sqlite", "file:"+path.(string)+"?_pragma=busy_timeout(5000)")
			if err != nil {
				tb.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(query, args...); err != nil {
				tb.Fatalf("tamper %q: %v", query, err)
			}
		},
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness())
}
