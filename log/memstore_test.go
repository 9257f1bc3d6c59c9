package log

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/transparency-dev/merkle/compact"
)

func TestMemStoreWriteIsAtomic(t *testing.T) {
	ctx := context.Background()
	var s MemStore // the zero value is usable
	a, b := leafValue(1), leafValue(2)
	id := func(i uint64) compact.NodeID { return compact.NodeID{Index: i} }
	if err := s.WriteNodes(ctx, []Node{{id(0), a}}); err != nil {
		t.Fatal(err)
	}
	before := maps.Clone(s.nodes)

	tests := []struct {
		name  string
		nodes []Node
	}{
		{"conflict with stored node", []Node{{id(1), a}, {id(0), b}}},
		{"conflict inside the batch", []Node{{id(1), a}, {id(2), a}, {id(1), b}}},
	}
	for _, tt := range tests {
		err := s.WriteNodes(ctx, tt.nodes)
		if !errors.Is(err, ErrNodeConflict) {
			t.Errorf("%s: %v, want ErrNodeConflict", tt.name, err)
		}
		if !maps.Equal(s.nodes, before) {
			t.Errorf("%s: store changed by a refused write", tt.name)
		}
	}
	if err := s.WriteNodes(ctx, []Node{{id(0), a}, {id(0), a}}); err != nil {
		t.Errorf("rewriting identical nodes: %v", err)
	}
	_, err := s.ReadNodes(ctx, []compact.NodeID{id(0), id(5)})
	var nf *NodeNotFoundError
	if !errors.As(err, &nf) || nf.ID != id(5) {
		t.Errorf("reading a missing node: %v, want it named", err)
	}
}

// TestConcurrentUse runs one appender and several provers against one
// MemStore, as a journal does while auditors fetch proofs; run with -race.
// Every proof is checked against roots computed beforehand on another store.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	const n, readers = 300, 4
	vs := leafValues(n)
	wantRoots := make([]Hash, n+1)
	ref := buildStore(t, vs)
	for i := range wantRoots {
		wantRoots[i], _ = Root(ctx, ref, uint64(i))
	}

	s := &MemStore{}
	var committed atomic.Uint64
	var reads atomic.Int64 // reader iterations, so the writer can wait for overlap
	var wg sync.WaitGroup
	errs := make(chan error, readers+1)
	wg.Go(func() {
		for size := uint64(0); size < n; {
			// Let the readers run between appends, or on a fast machine the
			// appends finish before any reader starts and nothing overlaps.
			for seen := reads.Load(); reads.Load() < seen+readers && len(errs) == 0; {
				runtime.Gosched()
			}
			k := min(1+size%5, n-size)
			root, err := Append(ctx, s, size, vs[size:size+k]...)
			if err != nil {
				errs <- err
				return
			}
			size += k
			if root != wantRoots[size] {
				errs <- errors.New("append returned a wrong root")
				return
			}
			committed.Store(size)
		}
	})
	for r := range readers {
		wg.Go(func() {
			for iter := uint64(r); committed.Load() < n || iter%50 != 0; iter++ {
				reads.Add(1)
				size := committed.Load()
				if size == 0 {
					continue
				}
				i, old := iter%size, (iter*7)%(size+1)
				p, err := InclusionProof(ctx, s, i, size)
				if err == nil {
					err = VerifyInclusion(vs[i], i, size, p, wantRoots[size])
				}
				if err == nil {
					p, err = ConsistencyProof(ctx, s, old, size)
				}
				if err == nil {
					err = VerifyConsistency(old, size, wantRoots[old], wantRoots[size], p)
				}
				if err == nil {
					// Identical rewrites from another goroutine must be harmless.
					err = s.WriteNodes(ctx, []Node{{compact.NodeID{Index: i}, LeafHash(vs[i])}})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !maps.Equal(s.nodes, ref.nodes) {
		t.Error("concurrently built store differs from the sequential one")
	}
}
