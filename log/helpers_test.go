package log

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/tlog"
)

// leafValue is the deterministic leaf value of position i in test trees.
func leafValue(i uint64) Hash {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], i)
	return sha256.Sum256(append([]byte("runseal test leaf "), b[:]...))
}

func leafValues(n int) []Hash {
	vs := make([]Hash, n)
	for i := range vs {
		vs[i] = leafValue(uint64(i))
	}
	return vs
}

// buildStore appends vs one at a time, which is how a journal seals runs, and
// checks that each returned root matches the store.
func buildStore(t testing.TB, vs []Hash) *MemStore {
	t.Helper()
	ctx := context.Background()
	s := &MemStore{}
	for i, v := range vs {
		root, err := Append(ctx, s, uint64(i), v)
		if err != nil {
			t.Fatalf("Append at size %d: %v", i, err)
		}
		got, err := Root(ctx, s, uint64(i+1))
		if err != nil {
			t.Fatalf("Root(%d): %v", i+1, err)
		}
		if got != root {
			t.Fatalf("Root(%d) = %x, Append returned %x", i+1, got, root)
		}
	}
	return s
}

// ref is RFC 6962 §2.1 written out literally over the leaf values, with no
// code shared with the package: MTH, PATH and PROOF/SUBPROOF. It is quadratic
// and only for small trees; subtree hashes are memoized to keep the
// exhaustive tests quick.
type ref struct {
	vs   []Hash
	memo map[[2]int]Hash
}

func newRef(vs []Hash) *ref { return &ref{vs: vs, memo: map[[2]int]Hash{}} }

func refNode(l, r Hash) Hash {
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// split is the largest power of two strictly less than n (n >= 2).
func split(n int) int {
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	return k
}

func (r *ref) mth(lo, hi int) Hash {
	if h, ok := r.memo[[2]int{lo, hi}]; ok {
		return h
	}
	var h Hash
	switch n := hi - lo; n {
	case 0:
		h = sha256.Sum256(nil)
	case 1:
		h = sha256.Sum256(append([]byte{0}, r.vs[lo][:]...))
	default:
		k := split(n)
		h = refNode(r.mth(lo, lo+k), r.mth(lo+k, hi))
	}
	r.memo[[2]int{lo, hi}] = h
	return h
}

func (r *ref) path(m, lo, hi int) []Hash {
	n := hi - lo
	if n == 1 {
		return nil
	}
	k := split(n)
	if m < k {
		return append(r.path(m, lo, lo+k), r.mth(lo+k, hi))
	}
	return append(r.path(m-k, lo+k, hi), r.mth(lo, lo+k))
}

func (r *ref) subproof(m, lo, hi int, b bool) []Hash {
	n := hi - lo
	if m == n {
		if b {
			return nil
		}
		return []Hash{r.mth(lo, hi)}
	}
	k := split(n)
	if m <= k {
		return append(r.subproof(m, lo, lo+k, b), r.mth(lo+k, hi))
	}
	return append(r.subproof(m-k, lo+k, hi, false), r.mth(lo, lo+k))
}

// tlogMirror holds the same leaves in golang.org/x/mod/sumdb/tlog's layout.
// tlog's record hash is SHA-256(0x00 || data), so passing the 32-byte leaf
// value as the record data gives the same leaf hash as LeafHash.
type tlogMirror struct {
	stored []tlog.Hash
}

func (m *tlogMirror) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x < 0 || x >= int64(len(m.stored)) {
			return nil, fmt.Errorf("tlog mirror: no stored hash %d", x)
		}
		out[i] = m.stored[x]
	}
	return out, nil
}

func newTlogMirror(t testing.TB, vs []Hash) *tlogMirror {
	t.Helper()
	m := &tlogMirror{}
	for i, v := range vs {
		hs, err := tlog.StoredHashes(int64(i), v[:], m)
		if err != nil {
			t.Fatalf("tlog.StoredHashes(%d): %v", i, err)
		}
		m.stored = append(m.stored, hs...)
	}
	return m
}

func toTlog(hs []Hash) []tlog.Hash {
	out := make([]tlog.Hash, len(hs))
	for i, h := range hs {
		out[i] = tlog.Hash(h)
	}
	return out
}

// constTree is a consistent tree of any size up to 2^64-1 whose leaves all
// have the same value: every node at level l has the same hash, so it can
// answer for sizes no real store could hold. Writes are checked against it.
type constTree struct {
	value  Hash
	levels [64]Hash
	writes atomic.Int64
}

func newConstTree(v Hash) *constTree {
	c := &constTree{value: v}
	c.levels[0] = LeafHash(v)
	for l := 1; l < 64; l++ {
		c.levels[l] = refNode(c.levels[l-1], c.levels[l-1])
	}
	return c
}

func (c *constTree) ReadNodes(_ context.Context, ids []compact.NodeID) ([]Hash, error) {
	out := make([]Hash, len(ids))
	for i, id := range ids {
		// A perfect subtree of level 64 would need 2^64 leaves.
		if id.Level >= 64 || id.Index > (^uint64(0))>>id.Level-1 {
			return nil, &NodeNotFoundError{ID: id}
		}
		out[i] = c.levels[id.Level]
	}
	return out, nil
}

func (c *constTree) WriteNodes(_ context.Context, nodes []Node) error {
	for _, n := range nodes {
		if n.ID.Level >= 64 || n.Hash != c.levels[n.ID.Level] {
			return &NodeConflictError{ID: n.ID, Written: n.Hash}
		}
		c.writes.Add(1)
	}
	return nil
}

// countingReader counts calls and node ids read, to show that no operation
// scans the tree.
type countingReader struct {
	NodeWriter
	mu    sync.Mutex
	calls int
	ids   int
}

func (c *countingReader) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]Hash, error) {
	c.mu.Lock()
	c.calls++
	c.ids += len(ids)
	c.mu.Unlock()
	return c.NodeWriter.ReadNodes(ctx, ids)
}

func (c *countingReader) reset() (calls, ids int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, ids = c.calls, c.ids
	c.calls, c.ids = 0, 0
	return calls, ids
}

// inclusionShape runs the RFC 9162 §2.1.3.2 verification algorithm's control
// flow for a proof of length n and returns the sequence of left/right
// decisions it would take, and false if it would reject on shape alone. Two
// (index, size) pairs with the same shape make a verifier compute the same
// root from the same proof, so only pairs with different shapes are expected
// to reject each other's proofs.
func inclusionShape(index, size uint64, n int) (string, bool) {
	if index >= size {
		return "", false
	}
	fn, sn := index, size-1
	s := make([]byte, 0, n)
	for range n {
		if sn == 0 {
			return "", false
		}
		if fn&1 == 1 || fn == sn {
			s = append(s, 'L')
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			s = append(s, 'R')
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return "", false
	}
	return string(s), true
}

// consistencyShape is inclusionShape for RFC 9162 §2.1.4.2: whether the old
// root is taken as the seed, then per element whether it folds into both
// roots ('B') or only into the new one ('N').
func consistencyShape(oldSize, newSize uint64, n int) (string, bool) {
	if oldSize == 0 || oldSize >= newSize {
		return "", false
	}
	if n == 0 {
		return "", false
	}
	s := []byte{'p'}
	if bits.OnesCount64(oldSize) == 1 {
		s[0] = 'o'
		n++
	}
	fn, sn := oldSize-1, newSize-1
	if fn&1 == 1 {
		for fn&1 == 1 {
			fn >>= 1
			sn >>= 1
		}
	}
	for range n - 1 {
		if sn == 0 {
			return "", false
		}
		if fn&1 == 1 || fn == sn {
			s = append(s, 'B')
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			s = append(s, 'N')
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return "", false
	}
	return string(s), true
}
