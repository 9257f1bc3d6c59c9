package log

import (
	"context"
	"errors"
	"sync"

	"github.com/transparency-dev/merkle/compact"
)

// MemStore is a [NodeWriter] held in memory, for tests and for small logs
// that need no durability. It is safe for concurrent use: readers proceed in
// parallel, and each WriteNodes call is atomic (all of its nodes or none
// become visible). Appends must still be serialized by the caller, which must
// also track the tree size, as with any store. The zero value is an empty
// store.
type MemStore struct {
	mu    sync.RWMutex
	nodes map[compact.NodeID]Hash
}

var errNilMemStore = errors.New("log: nil *MemStore")

// ReadNodes returns the hashes of ids in order, or a [*NodeNotFoundError] for
// the first id it does not hold.
func (s *MemStore) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]Hash, error) {
	if s == nil {
		return nil, errNilMemStore
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Hash, len(ids))
	for i, id := range ids {
		h, ok := s.nodes[id]
		if !ok {
			return nil, &NodeNotFoundError{ID: id}
		}
		out[i] = h
	}
	return out, nil
}

// WriteNodes stores nodes atomically. A node already stored with the same hash
// is left alone; one stored with a different hash makes the whole call fail
// with a [*NodeConflictError] and leaves the store as it was, as a rolled-back
// transaction would.
func (s *MemStore) WriteNodes(ctx context.Context, nodes []Node) error {
	if s == nil {
		return errNilMemStore
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes == nil {
		s.nodes = make(map[compact.NodeID]Hash)
	}
	// Apply as we check and undo on conflict, which also catches one batch
	// carrying two hashes for the same node.
	var added []compact.NodeID
	for _, n := range nodes {
		old, ok := s.nodes[n.ID]
		if ok {
			if old != n.Hash {
				for _, id := range added {
					delete(s.nodes, id)
				}
				return &NodeConflictError{ID: n.ID, Stored: old, Written: n.Hash}
			}
			continue
		}
		s.nodes[n.ID] = n.Hash
		added = append(added, n.ID)
	}
	return nil
}

// Len returns the number of nodes stored: 2n - popcount(n) for a tree of n
// leaves (every perfect subtree, nothing else), which lets a test check that
// an append wrote exactly the nodes it should.
func (s *MemStore) Len() int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.nodes)
}
