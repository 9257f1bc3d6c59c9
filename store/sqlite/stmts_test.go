package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestHotStatementsOnlyInWriter runs readers that share the writer's queries
// (loadRun) while appends are in flight: a statement prepared on the writer
// connection must never be used by a reader, and the writer must use it.
func TestHotStatementsOnlyInWriter(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), Options{})
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
	if len(s.hot) != len(hotQueries) {
		t.Fatalf("%d hot statements prepared, want %d", len(s.hot), len(hotQueries))
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
