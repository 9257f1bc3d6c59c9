package lifecycle_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/lifecycletest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// journalBackend is a JournalStorage on its own SQLite file.
type journalBackend struct {
	*lifecycle.JournalStorage
	store *sqlite.Store
}

func (b journalBackend) Close() error { return b.store.Close() }

// openJournal opens (creating) the SQLite journal at path.
func openJournal(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		tb.Fatalf("open journal: %v", err)
	}
	return st
}

func newJournalStorage(tb testing.TB, j store.Journal) *lifecycle.JournalStorage {
	tb.Helper()
	s, err := lifecycle.NewJournalStorage(j)
	if err != nil {
		tb.Fatalf("new journal storage: %v", err)
	}
	return s
}

// journalFactory returns a factory of fresh journal backends, each on a new
// file under dir.
func journalFactory(dir string) lifecycletest.Factory {
	var n atomic.Int64
	return func() (lifecycletest.Backend, error) {
		path := filepath.Join(dir, fmt.Sprintf("journal-%d.db", n.Add(1)))
		st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			return nil, err
		}
		s, err := lifecycle.NewJournalStorage(st)
		if err != nil {
			st.Close()
			return nil, err
		}
		return journalBackend{JournalStorage: s, store: st}, nil
	}
}

func TestJournalStorageConformance(t *testing.T) {
	lifecycletest.Run(t, journalFactory(t.TempDir()))
}
