package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestHotStatementsOnlyInWriter runs readers that share the writer's queries
// (loadRun) while appends, and merges of their keys, are in flight: a
// statement prepared on the writer connection must never be used by a
// reader, the writer must use it, and the read pool's own prepared
// statements (readQueries) must read what each snapshot holds.
func TestHotStatementsOnlyInWriter(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), Options{mergeKeysAt: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := store.NewRunID()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Head(ctx, run); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Read(ctx, run, 1); err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 50 {
		if _, err := s.Append(ctx, 1, []store.Append{{Run: run, Kind: "Note"}, {Run: run, Kind: "Note"}}); err != nil {
			t.Fatal(i, err)
		}
	}
	close(stop)
	wg.Wait()
	if d, err := s.Verify(ctx, run); err != nil || d != mustHead(t, s, run).Hash {
		t.Fatal(d, err)
	}
	if len(s.hot) != len(hotQueries) || len(s.reads) != len(readQueries) {
		t.Fatalf("%d hot and %d read statements prepared, want %d and %d", len(s.hot), len(s.reads), len(hotQueries), len(readQueries))
	}
}

func mustHead(t *testing.T, s *Store, run store.RunID) store.Head {
	h, err := s.Head(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if h.Seq != 100 {
		t.Fatalf("head seq %d, want 100", h.Seq)
	}
	return h
}
