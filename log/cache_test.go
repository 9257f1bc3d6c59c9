package log

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"
)

// TestNodeCache_ProofsVerifyOutsideIn grows a tree one leaf at a time
// behind a small cache (so its floor rises and levels are dropped on the
// way) and, at every size, checks the root and a spread of inclusion and
// consistency proofs read through the cache with transparency-dev/merkle's
// and x/mod tlog's verifiers, and against the same proofs read without it.
func TestNodeCache_ProofsVerifyOutsideIn(t *testing.T) {
	ctx := context.Background()
	const n = 700
	vs := leafValues(n)
	s := &MemStore{}
	c := NewNodeCache(4 * chunkBytes)
	mirror := newTlogMirror(t, vs)
	floors := map[uint]bool{}
	for size := uint64(1); size <= n; size++ {
		if _, err := Append(ctx, s, size-1, vs[size-1]); err != nil {
			t.Fatal(err)
		}
		r := c.Reader(s, size)
		floors[c.Stats().Floor] = true
		root, err := Root(ctx, r, size)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := Root(ctx, s, size); root != want {
			t.Fatalf("cached Root(%d) = %x, want %x", size, root, want)
		}
		th, err := tlog.TreeHash(int64(size), mirror)
		if err != nil || Hash(th) != root {
			t.Fatalf("tlog.TreeHash(%d) = %x, %v; cached root %x", size, th, err, root)
		}
		for _, i := range []uint64{0, size / 3, size / 2, size - 1} {
			p, err := InclusionProof(ctx, r, i, size)
			if err != nil {
				t.Fatal(err)
			}
			lh := LeafHash(vs[i])
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, lh[:], toSlices(p), root[:]); err != nil {
				t.Fatalf("inclusion %d in %d through the cache: %v", i, size, err)
			}
		}
		for _, old := range []uint64{1, size / 2, size - 1} {
			if old == 0 || old >= size {
				continue
			}
			p, err := ConsistencyProof(ctx, r, old, size)
			if err != nil {
				t.Fatal(err)
			}
			oldRoot, _ := Root(ctx, s, old)
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old, size, toSlices(p), oldRoot[:], root[:]); err != nil {
				t.Fatalf("consistency %d..%d through the cache: %v", old, size, err)
			}
		}
	}
	st := c.Stats()
	if st.Bytes > 4*chunkBytes {
		t.Errorf("cache holds %d bytes, bound %d", st.Bytes, 4*chunkBytes)
	}
	if len(floors) < 2 || st.Hits == 0 {
		t.Errorf("floors seen %v, stats %+v: the test did not exercise a rising floor and hits", floors, st)
	}
}

// TestNodeCache_StaysWithinBound reads every node of a large tree through a
// cache a fraction of its size: the bytes held never pass the bound, and
// the levels it keeps are the top ones.
func TestNodeCache_StaysWithinBound(t *testing.T) {
	ctx := context.Background()
	const size = 1 << 14
	s := newConstTree(leafValue(7))
	for _, max := range []int64{0, chunkBytes - 1, chunkBytes, 10 * chunkBytes, 2 << 20} {
		c := NewNodeCache(max)
		r := c.Reader(s, size)
		for l := uint(0); l <= 14; l++ {
			for i := uint64(0); i < size>>l; i++ {
				if _, err := r.ReadNodes(ctx, []compact.NodeID{compact.NewNodeID(l, i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		st := c.Stats()
		if st.Bytes > max {
			t.Errorf("bound %d: holds %d bytes", max, st.Bytes)
		}
		// Every level from the floor up fits, the one below does not.
		if st.Floor > 0 && floorFor(size, max) != st.Floor {
			t.Errorf("bound %d: floor %d, want %d", max, st.Floor, floorFor(size, max))
		}
		if max >= 2<<20 && st.Floor != 0 {
			t.Errorf("bound %d: floor %d, want every level kept", max, st.Floor)
		}
	}
}

// TestNodeCache_MissingNodeNotCached asks for a size past the store's:
// the cache answers with the store's missing node, and after the store
// grows it serves the real node, never a zero hash it made up.
func TestNodeCache_MissingNodeNotCached(t *testing.T) {
	ctx := context.Background()
	vs := leafValues(64)
	s := buildStore(t, vs[:32])
	c := NewNodeCache(1 << 20)
	if _, err := InclusionProof(ctx, c.Reader(s, 32), 3, 64); !errors.Is(err, ErrNodeNotFound) {
		t.Fatalf("proof at a size past the store: %v, want ErrNodeNotFound", err)
	}
	for i := 32; i < 64; i++ {
		if _, err := Append(ctx, s, uint64(i), vs[i]); err != nil {
			t.Fatal(err)
		}
	}
	r := c.Reader(s, 64)
	got, err := Root(ctx, r, 64)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Root(ctx, s, 64); got != want {
		t.Fatalf("root through the cache %x, want %x", got, want)
	}
}

// TestNodeCache_ShortAnswerIsAnError: a store that returns fewer hashes
// than asked is an error, not zero hashes in the proof.
func TestNodeCache_ShortAnswerIsAnError(t *testing.T) {
	c := NewNodeCache(1 << 20)
	_, err := c.Reader(shortReader{}, 8).ReadNodes(context.Background(), []compact.NodeID{compact.NewNodeID(0, 1), compact.NewNodeID(1, 1)})
	if err == nil {
		t.Fatal("a short answer from the store passed through the cache")
	}
}

type shortReader struct{}

func (shortReader) ReadNodes(context.Context, []compact.NodeID) ([]Hash, error) {
	return []Hash{{1}}, nil
}

// TestNodeCache_ConcurrentReadersAndGrowth runs proofs from several
// goroutines through one cache while the tree grows (run it with -race).
func TestNodeCache_ConcurrentReadersAndGrowth(t *testing.T) {
	ctx := context.Background()
	const n = 512
	vs := leafValues(n)
	s := buildStore(t, vs[:2])
	c := NewNodeCache(3 * chunkBytes)
	var size atomic.Uint64
	size.Store(2)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := uint64(g); ; i++ {
				select {
				case <-done:
					return
				default:
				}
				sz := size.Load()
				r := c.Reader(s, sz)
				root, err := Root(ctx, r, sz)
				if err != nil {
					t.Error(err)
					return
				}
				p, err := InclusionProof(ctx, r, i%sz, sz)
				if err != nil {
					t.Error(err)
					return
				}
				if err := VerifyInclusion(vs[i%sz], i%sz, sz, p, root); err != nil {
					t.Errorf("inclusion %d in %d: %v", i%sz, sz, err)
					return
				}
			}
		})
	}
	for i := uint64(2); i < n; i++ {
		if _, err := Append(ctx, s, i, vs[i]); err != nil {
			t.Fatal(err)
		}
		size.Store(i + 1)
	}
	close(done)
	wg.Wait()
}

// TestNodeCache_Fill: after Fill, a proof reads from the store only the
// nodes below the floor, the bound holds, and a failing range read is an
// error that leaves the cache usable.
func TestNodeCache_Fill(t *testing.T) {
	ctx := context.Background()
	const size = 3000
	s := buildStore(t, leafValues(size))
	read := func(ctx context.Context, level uint, start, end uint64) ([]Hash, error) {
		ids := make([]compact.NodeID, 0, end-start)
		for i := start; i < end; i++ {
			ids = append(ids, compact.NewNodeID(level, i))
		}
		return s.ReadNodes(ctx, ids)
	}
	const max = 6 * chunkBytes
	c := NewNodeCache(max)
	if err := c.Fill(ctx, read, size); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Bytes > max || st.Floor == 0 {
		t.Fatalf("after Fill: %+v, want within %d bytes and a floor above 0", st, max)
	}
	lr := &levelRecorder{r: s}
	root, _ := Root(ctx, s, size)
	for _, i := range []uint64{0, 1234, size - 1} {
		p, err := InclusionProof(ctx, c.Reader(lr, size), i, size)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyInclusion(leafValue(i), i, size, p, root); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range lr.ids {
		if id.Level >= st.Floor {
			t.Errorf("after Fill a proof read node %+v from the store, at or above the floor %d", id, st.Floor)
		}
	}
	failing := func(context.Context, uint, uint64, uint64) ([]Hash, error) { return nil, errors.New("disk on fire") }
	c2 := NewNodeCache(max)
	if err := c2.Fill(ctx, failing, size); err == nil {
		t.Fatal("Fill with a failing reader: no error")
	}
	<-c2.FillInBackground(context.Background(), failing, size)
	if _, err := Root(ctx, c2.Reader(s, size), size); err != nil {
		t.Fatalf("the cache after a failed fill: %v", err)
	}
}

// levelRecorder records the ids read through it.
type levelRecorder struct {
	r   NodeReader
	ids []compact.NodeID
}

func (l *levelRecorder) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]Hash, error) {
	l.ids = append(l.ids, ids...)
	return l.r.ReadNodes(ctx, ids)
}

// TestNodeCache_StopFillOutlivesNoFill: a store closing its file cancels
// the fill's context and calls StopFill, which must not return while the
// fill still reads (a fill reading a closed file left files behind it in
// a test's temporary directory), and must keep any later fill from
// starting.
func TestNodeCache_StopFillOutlivesNoFill(t *testing.T) {
	const size = 1 << 12
	started := make(chan struct{})
	var reading atomic.Bool
	blocking := func(ctx context.Context, _ uint, _, _ uint64) ([]Hash, error) {
		reading.Store(true)
		defer reading.Store(false)
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c := NewNodeCache(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := c.FillInBackground(ctx, blocking, size)
	<-started
	cancel()
	c.StopFill()
	if reading.Load() {
		t.Fatal("StopFill returned while the fill was still reading")
	}
	select {
	case <-done:
	default:
		t.Fatal("StopFill returned before the fill ended")
	}

	stopped := NewNodeCache(1 << 20)
	stopped.StopFill()
	called := false
	<-stopped.FillInBackground(context.Background(), func(context.Context, uint, uint64, uint64) ([]Hash, error) {
		called = true
		return nil, nil
	}, size)
	if called {
		t.Fatal("a fill started after StopFill")
	}
}

// TestNodeCache_CacheNothingReadsThrough: a one-pass command (journal
// export) opens its store with CacheNothing; the cache must then read no
// range to fill, keep no node, and answer every read from the store, the
// same answers the store gives.
func TestNodeCache_CacheNothingReadsThrough(t *testing.T) {
	ctx := context.Background()
	const size = 3000
	s := buildStore(t, leafValues(size))
	ranges := 0
	read := func(ctx context.Context, level uint, start, end uint64) ([]Hash, error) {
		ranges++
		return nil, errors.New("CacheNothing filled a range")
	}
	c := NewNodeCache(CacheNothing)
	if err := c.Fill(ctx, read, size); err != nil || ranges != 0 {
		t.Fatalf("Fill: %v after %d range reads, want none", err, ranges)
	}
	<-c.FillInBackground(ctx, read, size)
	lr := &levelRecorder{r: s}
	want, err := Root(ctx, s, size)
	if err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 2; pass++ {
		got, err := Root(ctx, c.Reader(lr, size), size)
		if err != nil || got != want {
			t.Fatalf("pass %d: root %x, %v; want %x", pass, got, err, want)
		}
	}
	if st := c.Stats(); st.Bytes != 0 || st.Hits != 0 || ranges != 0 {
		t.Errorf("after two root reads: %+v and %d range reads, want nothing kept or filled", st, ranges)
	}
	if len(lr.ids) == 0 {
		t.Error("no read reached the store")
	}
}
