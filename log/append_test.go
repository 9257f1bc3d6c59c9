package log

import (
	"context"
	"errors"
	"maps"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/transparency-dev/merkle/compact"
)

// TestAppendBatching: however the same leaves are split into appends, the
// store ends up with the same nodes and every append returns the same root,
// so a backend may group seals freely.
func TestAppendBatching(t *testing.T) {
	ctx := context.Background()
	const n = 100
	vs := leafValues(n)
	want := buildStore(t, vs)
	wantRoot, err := Root(ctx, want, n)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	randomSplit := func() []int {
		var out []int
		for left := n; left > 0; {
			k := 1 + rnd.IntN(min(left, 17))
			out = append(out, k)
			left -= k
		}
		return out
	}
	even := func(total, k int) []int {
		var out []int
		for left := total; left > 0; left -= k {
			out = append(out, min(k, left))
		}
		return out
	}
	tests := []struct {
		name    string
		batches []int
	}{
		{"all at once", []int{n}},
		{"pairs", even(n, 2)},
		{"sevens", even(n, 7)},
		{"power-of-two batches", []int{1, 2, 4, 8, 16, 32, 37}},
		{"with empty batches", append([]int{0, 3, 0}, even(n-3, 1)...)},
		{"random 1", randomSplit()},
		{"random 2", randomSplit()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &MemStore{}
			var size uint64
			for _, k := range tt.batches {
				root, err := Append(ctx, s, size, vs[size:size+uint64(k)]...)
				if err != nil {
					t.Fatalf("Append(%d leaves at %d): %v", k, size, err)
				}
				size += uint64(k)
				if wantR, _ := Root(ctx, want, size); root != wantR {
					t.Fatalf("root after %d leaves = %x, one-by-one gives %x", size, root, wantR)
				}
			}
			if size != n {
				t.Fatalf("test bug: batches sum to %d", size)
			}
			if !maps.Equal(s.nodes, want.nodes) {
				t.Errorf("store differs from one-by-one: %d nodes vs %d", len(s.nodes), len(want.nodes))
			}
			if got, _ := Root(ctx, s, n); got != wantRoot {
				t.Errorf("final root %x, want %x", got, wantRoot)
			}
		})
	}
	if got, want := want.Len(), 2*n-bits.OnesCount(n); got != want {
		t.Errorf("store of %d leaves holds %d nodes, want %d (the perfect subtrees)", n, got, want)
	}
}

// TestAppendWrongSize: appending at a size other than the committed one must
// fail rather than silently rewrite or extend a different tree.
func TestAppendWrongSize(t *testing.T) {
	ctx := context.Background()
	s := buildStore(t, leafValues(10))
	before := maps.Clone(s.nodes)

	_, err := Append(ctx, s, 7, leafValue(500), leafValue(501), leafValue(502), leafValue(503))
	if !errors.Is(err, ErrNodeConflict) {
		t.Errorf("Append at a stale size: %v, want ErrNodeConflict", err)
	}
	var ce *NodeConflictError
	if !errors.As(err, &ce) || ce.ID != (compact.NodeID{Level: 0, Index: 7}) {
		t.Errorf("conflict error %v does not name leaf 7", err)
	}

	_, err = Append(ctx, s, 12, leafValue(500))
	var nf *NodeNotFoundError
	if !errors.Is(err, ErrNodeNotFound) || !errors.As(err, &nf) {
		t.Errorf("Append past the stored size: %v, want a *NodeNotFoundError", err)
	}
	if !maps.Equal(s.nodes, before) {
		t.Error("a refused Append changed the store")
	}

	// Re-appending the same leaves at the same size is harmless: a retried
	// transaction writes the same nodes.
	root10, _ := Root(ctx, s, 10)
	got, err := Append(ctx, s, 9, leafValue(9))
	if err != nil || got != root10 {
		t.Errorf("idempotent re-append: %x, %v; want %x", got, err, root10)
	}
	if !maps.Equal(s.nodes, before) {
		t.Error("an idempotent re-append changed the store")
	}

	// No leaves: the root at size, nothing written.
	got, err = Append(ctx, s, 10)
	if err != nil || got != root10 {
		t.Errorf("Append of no leaves = %x, %v; want %x", got, err, root10)
	}
	if got, err := Append(ctx, &MemStore{}, 0); err != nil || got != EmptyRoot() {
		t.Errorf("Append of no leaves to empty = %x, %v", got, err)
	}
}

// brokenStore misbehaves in one chosen way.
type brokenStore struct {
	MemStore
	readErr, writeErr error
	short             bool
}

func (b *brokenStore) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]Hash, error) {
	if b.readErr != nil {
		return nil, b.readErr
	}
	hs, err := b.MemStore.ReadNodes(ctx, ids)
	if b.short && len(hs) > 0 {
		hs = hs[:len(hs)-1]
	}
	return hs, err
}

func (b *brokenStore) WriteNodes(ctx context.Context, nodes []Node) error {
	if b.writeErr != nil {
		return b.writeErr
	}
	return b.MemStore.WriteNodes(ctx, nodes)
}

// TestStoreFailures: store errors surface wrapped, and a store that breaks
// its contract yields an error, never a wrong root or a panic.
func TestStoreFailures(t *testing.T) {
	ctx := context.Background()
	errIO := errors.New("disk on fire")
	newBroken := func() *brokenStore {
		b := &brokenStore{}
		if _, err := Append(ctx, b, 0, leafValues(9)...); err != nil {
			t.Fatal(err)
		}
		return b
	}
	calls := map[string]func(NodeWriter) error{
		"Root":             func(w NodeWriter) error { _, err := Root(ctx, w, 9); return err },
		"InclusionProof":   func(w NodeWriter) error { _, err := InclusionProof(ctx, w, 3, 9); return err },
		"ConsistencyProof": func(w NodeWriter) error { _, err := ConsistencyProof(ctx, w, 3, 9); return err },
		"Append":           func(w NodeWriter) error { _, err := Append(ctx, w, 9, leafValue(9)); return err },
	}
	for name, call := range calls {
		b := newBroken()
		b.readErr = errIO
		if err := call(b); !errors.Is(err, errIO) {
			t.Errorf("%s with failing reads: %v, want it to wrap the store error", name, err)
		}
		b = newBroken()
		b.short = true
		if err := call(b); err == nil {
			t.Errorf("%s with a store returning too few hashes: no error", name)
		}
		if err := call(nil); err == nil {
			t.Errorf("%s with a nil store: no error", name)
		}
	}
	b := newBroken()
	b.writeErr = errIO
	if _, err := Append(ctx, b, 9, leafValue(9)); !errors.Is(err, errIO) {
		t.Errorf("Append with failing writes: %v", err)
	}
	if b.Len() != 2*9-2 {
		t.Errorf("failed Append left %d nodes, want the %d it started with", b.Len(), 2*9-2)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Root(cctx, newBroken(), 9); !errors.Is(err, context.Canceled) {
		t.Errorf("Root with a cancelled context: %v", err)
	}
	var nilStore *MemStore
	if _, err := Root(ctx, nilStore, 1); err == nil {
		t.Error("Root on a nil *MemStore: no error")
	}
}

// TestBeyondStoredSize: the package does not know the store's size, so every
// question about a larger tree must fail on a missing node rather than be
// answered from the nodes that happen to exist.
func TestBeyondStoredSize(t *testing.T) {
	ctx := context.Background()
	const stored = 10
	s := buildStore(t, leafValues(stored))
	wantMissing := func(t *testing.T, err error, format string, args ...any) {
		t.Helper()
		var nf *NodeNotFoundError
		if !errors.Is(err, ErrNodeNotFound) || !errors.As(err, &nf) {
			t.Errorf(format+": %v, want a *NodeNotFoundError", append(args, err)...)
		}
	}
	for n := uint64(stored + 1); n <= 2*stored+3; n++ {
		_, err := Root(ctx, s, n)
		wantMissing(t, err, "Root(%d)", n)
		for i := range n {
			_, err := InclusionProof(ctx, s, i, n)
			wantMissing(t, err, "InclusionProof(%d, %d)", i, n)
		}
		for m := uint64(1); m < n; m++ {
			_, err := ConsistencyProof(ctx, s, m, n)
			wantMissing(t, err, "ConsistencyProof(%d, %d)", m, n)
		}
		_, err = Append(ctx, s, n, leafValue(n))
		wantMissing(t, err, "Append at %d", n)
	}
	if s.Len() != 2*stored-2 {
		t.Errorf("store changed: %d nodes", s.Len())
	}
}
