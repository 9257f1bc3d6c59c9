package log

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/transparency-dev/merkle/compact"
)

// chunkNodes is how many consecutive nodes of one level a cache chunk holds:
// a tlog tile's width, so one chunk is 8 KiB of hashes.
const chunkNodes = 256

// chunkBytes is what one chunk costs: its hashes and its presence bits.
const chunkBytes = chunkNodes*32 + chunkNodes/8

type chunk struct {
	present [chunkNodes / 64]uint64
	hash    [chunkNodes]Hash
}

// NodeCache keeps node hashes of the upper levels of one tree in memory, in
// front of a [NodeReader], within a fixed number of bytes.
//
// It is sound because a stored node never changes (see the package
// invariants): a node read once from committed state has that hash for
// every later tree size. It is bounded because it keeps whole levels from
// the top down: for the largest size it has been told of, it keeps the
// levels at or above the lowest one at which every node of every level
// above still fits in its bytes, and drops a level when the tree outgrows
// it. A proof crosses every level once, so the levels kept are those every
// proof reads; the ones left to the store are the lowest, which few proofs
// share.
//
// A NodeCache is safe for concurrent use. It must only ever be filled from
// committed nodes: never put it in front of a writer's open transaction, or
// a node that transaction then rolls back could outlive it here.
type NodeCache struct {
	maxBytes int64

	mu     sync.RWMutex
	size   uint64 // the largest tree size seen
	floor  uint   // the lowest level kept; it only rises
	levels [64][]*chunk
	bytes  int64

	hits, misses atomic.Uint64

	fillOnce sync.Once
	filled   chan struct{} // closed when the background fill ends
}

// RangeReader reads the stored nodes of one level from index start to
// end-1, in order, all of them or an error (a backend's tile read).
type RangeReader func(ctx context.Context, level uint, start, end uint64) ([]Hash, error)

// RangeOf adapts a backend's tile read, which returns its own 32-byte
// digest type, to a RangeReader.
func RangeOf[D ~[32]byte](read func(ctx context.Context, level uint, start, end uint64) ([]D, error)) RangeReader {
	return func(ctx context.Context, level uint, start, end uint64) ([]Hash, error) {
		ds, err := read(ctx, level, start, end)
		if err != nil {
			return nil, err
		}
		hs := make([]Hash, len(ds))
		for i, d := range ds {
			hs[i] = Hash(d)
		}
		return hs, nil
	}
}

// fillRange is how many nodes Fill reads in one call.
const fillRange = 16 * chunkNodes

// Fill reads into the cache every node it would keep for a tree of size
// leaves, from the top level down, a range of one level at a time, skipping
// chunks it already holds. A proof then reads from the store only the
// levels below the floor. read must return committed nodes only.
func (c *NodeCache) Fill(ctx context.Context, read RangeReader, size uint64) error {
	c.grow(size)
	c.mu.RLock()
	floor := c.floor
	c.mu.RUnlock()
	for l := int(bits.Len64(size)); l >= int(floor); l-- {
		n := size >> uint(l)
		for start := uint64(0); start < n; start += fillRange {
			end := min(start+fillRange, n)
			if c.holds(uint(l), start, end) {
				continue
			}
			hs, err := read(ctx, uint(l), start, end)
			if err != nil {
				return fmt.Errorf("log: fill node cache, level %d [%d, %d): %w", l, start, end, err)
			}
			if uint64(len(hs)) != end-start {
				return fmt.Errorf("log: fill node cache, level %d [%d, %d): %d hashes", l, start, end, len(hs))
			}
			c.mu.Lock()
			for i, h := range hs {
				c.put(compact.NewNodeID(uint(l), start+uint64(i)), h)
			}
			c.mu.Unlock()
		}
	}
	return nil
}

// holds reports whether every node of level l from start to end-1 is
// cached.
func (c *NodeCache) holds(l uint, start, end uint64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i := start; i < end; i++ {
		if _, ok := c.get(compact.NewNodeID(l, i)); !ok {
			return false
		}
	}
	return true
}

// FillInBackground runs Fill once per cache, in its own goroutine under
// ctx, and returns a channel closed when that fill has ended (it is the
// same channel on every call). A fill that fails leaves the rest to the
// reads that miss. The store that owns the cache cancels ctx and calls
// StopFill when it closes, so no fill outlives it.
func (c *NodeCache) FillInBackground(ctx context.Context, read RangeReader, size uint64) <-chan struct{} {
	c.fillOnce.Do(func() {
		c.filled = make(chan struct{})
		go func() {
			defer close(c.filled)
			_ = c.Fill(ctx, read, size)
		}()
	})
	return c.filled
}

// StopFill keeps any later FillInBackground from starting a fill, and
// waits for a fill under way to end (cancel its context first, or the wait
// lasts the whole fill).
func (c *NodeCache) StopFill() {
	c.fillOnce.Do(func() {
		done := make(chan struct{})
		close(done)
		c.filled = done
	})
	<-c.filled
}

// CacheNothing, as the bound of a [NodeCache] (or a store's NodeCacheBytes
// option), keeps no node and passes every read through: for a command that
// reads the log once, a cache it would pay to fill is never used again.
const CacheNothing int64 = -1

// NewNodeCache returns an empty cache that holds at most maxBytes of
// hashes (and their presence bits; the few slice headers are not counted).
// Below one chunk (8 KiB), [CacheNothing] included, it keeps nothing and
// passes every read through.
func NewNodeCache(maxBytes int64) *NodeCache {
	return &NodeCache{maxBytes: maxBytes}
}

// CacheStats counts node reads through a [NodeCache]: Hits answered from
// memory, Misses read from the store behind it.
type CacheStats struct {
	Hits, Misses uint64
	Bytes        int64 // held now
	Floor        uint  // the lowest level kept
}

// Stats returns the cache's counters since it was made.
func (c *NodeCache) Stats() CacheStats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Bytes: c.bytes, Floor: c.floor}
}

// Reader returns r with the cache in front of it, for reads of a tree of
// size leaves that r holds committed. size picks the levels worth keeping; it
// must not be larger than the size r has committed, since a node beyond it
// would count against the bound.
func (c *NodeCache) Reader(r NodeReader, size uint64) NodeReader {
	c.grow(size)
	return cachedReader{c: c, r: r}
}

// floorFor is the lowest level from which every level up fits in max bytes
// for a tree of size leaves.
func floorFor(size uint64, max int64) uint {
	var used int64
	top := uint(bits.Len64(size)) // levels above have no complete node
	for l := int(top); l >= 0; l-- {
		used += int64(chunksFor(size>>uint(l))) * chunkBytes
		if used > max {
			return uint(l) + 1
		}
	}
	return 0
}

func chunksFor(nodes uint64) uint64 { return (nodes + chunkNodes - 1) / chunkNodes }

// grow raises the floor, dropping levels, when the tree has grown past
// what the bound holds at the current floor.
func (c *NodeCache) grow(size uint64) {
	c.mu.RLock()
	same := size <= c.size
	c.mu.RUnlock()
	if same {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if size <= c.size {
		return
	}
	c.size = size
	floor := min(floorFor(size, c.maxBytes), 64)
	for l := c.floor; l < floor; l++ {
		for _, ch := range c.levels[l] {
			if ch != nil {
				c.bytes -= chunkBytes
			}
		}
		c.levels[l] = nil
	}
	c.floor = max(c.floor, floor)
}

// get returns the cached hash of id, if any; the caller holds mu.RLock.
func (c *NodeCache) get(id compact.NodeID) (Hash, bool) {
	if id.Level < c.floor || id.Level >= 64 {
		return Hash{}, false
	}
	lv := c.levels[id.Level]
	i := id.Index / chunkNodes
	if i >= uint64(len(lv)) || lv[i] == nil {
		return Hash{}, false
	}
	ch, j := lv[i], id.Index%chunkNodes
	if ch.present[j/64]&(1<<(j%64)) == 0 {
		return Hash{}, false
	}
	return ch.hash[j], true
}

// put keeps h as id's hash if its level is kept and the node belongs to the
// tree of the size the bound was computed for; the caller holds mu.Lock.
func (c *NodeCache) put(id compact.NodeID, h Hash) {
	if id.Level < c.floor || id.Level >= 64 || id.Index >= c.size>>id.Level {
		return
	}
	i := id.Index / chunkNodes
	lv := c.levels[id.Level]
	if i >= uint64(len(lv)) {
		lv = append(lv, make([]*chunk, int(i)+1-len(lv))...)
		c.levels[id.Level] = lv
	}
	if lv[i] == nil {
		if c.bytes+chunkBytes > c.maxBytes {
			return
		}
		lv[i] = new(chunk)
		c.bytes += chunkBytes
	}
	j := id.Index % chunkNodes
	lv[i].present[j/64] |= 1 << (j % 64)
	lv[i].hash[j] = h
}

type cachedReader struct {
	c *NodeCache
	r NodeReader
}

// ReadNodes answers what it can from the cache and reads the rest from the
// store in one call, keeping what that returns.
func (cr cachedReader) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]Hash, error) {
	c := cr.c
	out := make([]Hash, len(ids))
	var missIdx [64]int
	miss := missIdx[:0]
	c.mu.RLock()
	for i, id := range ids {
		h, ok := c.get(id)
		if ok {
			out[i] = h
			continue
		}
		miss = append(miss, i)
	}
	c.mu.RUnlock()
	c.hits.Add(uint64(len(ids) - len(miss)))
	if len(miss) == 0 {
		return out, nil
	}
	c.misses.Add(uint64(len(miss)))
	want := make([]compact.NodeID, len(miss))
	for k, i := range miss {
		want[k] = ids[i]
	}
	got, err := cr.r.ReadNodes(ctx, want)
	if err != nil {
		return nil, err
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("node store returned %d hashes for %d nodes", len(got), len(want))
	}
	c.mu.Lock()
	for k, i := range miss {
		out[i] = got[k]
		c.put(want[k], got[k])
	}
	c.mu.Unlock()
	return out, nil
}

// Missing returns those of ids the cache does not hold now, in order: what
// a read through [NodeCache.Reader] would ask of the store, for a backend
// that fetches them ahead, with whatever else the proof needs, in one round
// trip.
func (c *NodeCache) Missing(ids []compact.NodeID) []compact.NodeID {
	var out []compact.NodeID
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, id := range ids {
		if _, ok := c.get(id); !ok {
			out = append(out, id)
		}
	}
	return out
}

// Floor is the lowest level the cache keeps for the largest tree size it
// has been told of: a proof reads the nodes below it from the store.
func (c *NodeCache) Floor() uint {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.floor
}
