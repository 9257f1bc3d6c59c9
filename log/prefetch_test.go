package log

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/transparency-dev/merkle/compact"
)

// recordingReader keeps the ids of every read.
type recordingReader struct {
	NodeReader
	ids []compact.NodeID
}

func (r *recordingReader) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]Hash, error) {
	r.ids = append(r.ids, ids...)
	return r.NodeReader.ReadNodes(ctx, ids)
}

// TestConsistencyNodes_AreWhatTheProofReads: a backend fetches
// ConsistencyNodes ahead, in the round trip that reads its size; if they
// were not exactly what ConsistencyProof reads, the proof would need
// another round trip (or, fetched from another size, fail).
func TestConsistencyNodes_AreWhatTheProofReads(t *testing.T) {
	ctx := context.Background()
	const n = 70
	s := buildStore(t, leafValues(n))
	for newSize := uint64(0); newSize <= n; newSize++ {
		for oldSize := uint64(0); oldSize <= newSize; oldSize++ {
			ids, err := ConsistencyNodes(oldSize, newSize)
			if err != nil {
				t.Fatal(err)
			}
			r := &recordingReader{NodeReader: s}
			if _, err := ConsistencyProof(ctx, r, oldSize, newSize); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, r.ids) {
				t.Fatalf("%d..%d: ConsistencyNodes %v, the proof read %v", oldSize, newSize, ids, r.ids)
			}
		}
	}
	var re *RangeError
	if _, err := ConsistencyNodes(3, 2); !errors.As(err, &re) {
		t.Fatalf("old above new: %v, want a RangeError", err)
	}
}

// TestNodeCacheMissing_IsWhatAReadSendsOn: Missing names exactly the ids a
// read through the cache would pass to the store.
func TestNodeCacheMissing_IsWhatAReadSendsOn(t *testing.T) {
	ctx := context.Background()
	const n = 1 << 12
	s := buildStore(t, leafValues(n))
	c := NewNodeCache(4 * chunkBytes)
	if err := c.Fill(ctx, RangeOf(func(ctx context.Context, level uint, start, end uint64) ([]Hash, error) {
		ids := make([]compact.NodeID, 0, end-start)
		for i := start; i < end; i++ {
			ids = append(ids, compact.NewNodeID(level, i))
		}
		return s.ReadNodes(ctx, ids)
	}), n); err != nil {
		t.Fatal(err)
	}
	if c.Floor() == 0 {
		t.Fatal("the cache keeps every level; the test needs a floor")
	}
	ids, err := ConsistencyNodes(1234, n)
	if err != nil {
		t.Fatal(err)
	}
	want := c.Missing(ids)
	if len(want) == 0 || len(want) == len(ids) {
		t.Fatalf("Missing %v of %v: want some, not all", want, ids)
	}
	r := &recordingReader{NodeReader: s}
	if _, err := ConsistencyProof(ctx, c.Reader(r, n), 1234, n); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(want, r.ids) {
		t.Fatalf("Missing %v, the store was asked for %v", want, r.ids)
	}
}

// TestAhead_ReadsOnlyWhatWasNotFetched: nodes read ahead are answered
// from memory, in the caller's order, and only the others reach the store,
// in one call.
func TestAhead_ReadsOnlyWhatWasNotFetched(t *testing.T) {
	ctx := context.Background()
	s := buildStore(t, leafValues(16))
	ids := []compact.NodeID{compact.NewNodeID(0, 3), compact.NewNodeID(1, 0), compact.NewNodeID(2, 3), compact.NewNodeID(0, 9)}
	want, err := s.ReadNodes(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	fetched := []Node{{ID: ids[2], Hash: want[2]}, {ID: ids[0], Hash: want[0]}}
	r := &recordingReader{NodeReader: s}
	got, err := Ahead(fetched, r).ReadNodes(ctx, ids)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Ahead: %v %v, want %v", got, err, want)
	}
	if !slices.Equal(r.ids, []compact.NodeID{ids[1], ids[3]}) {
		t.Fatalf("the store was asked for %v, want the two not fetched", r.ids)
	}
	r.ids = nil
	if _, err := Ahead(fetched, r).ReadNodes(ctx, []compact.NodeID{ids[2], ids[0]}); err != nil || r.ids != nil {
		t.Fatalf("all fetched: %v, store asked for %v", err, r.ids)
	}
}
