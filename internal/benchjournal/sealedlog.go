package benchjournal

import (
	"cmp"
	"context"
	"crypto/sha256"
	"slices"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// SealedLog is the log of n sealed runs a proofs benchmark serves proofs
// from, the same for every backend that builds it: run i's ID ends in the
// big-endian i+1 after a fixed prefix, its sealed leaf is the SHA-256 of
// that ID, and it sits at log index i.
type SealedLog struct {
	Runs   []store.RunID
	Leaves []log.Hash    // Leaves[i] is Runs[i]'s sealed leaf value
	Nodes  []log.Node    // every stored node, by level and then index: the order a b-tree takes them in fastest
	Tree   *log.MemStore // the same nodes, for a benchmark to count reads on
	Root   log.Hash
}

// NewSealedLog computes the log of n sealed runs in memory.
func NewSealedLog(ctx context.Context, n int) (*SealedLog, error) {
	l := &SealedLog{Runs: make([]store.RunID, n), Leaves: make([]log.Hash, n), Tree: &log.MemStore{}}
	for i := range l.Runs {
		var id store.RunID
		id[0], id[1] = 0x01, 0x90
		for b := range 8 {
			id[15-b] = byte(uint64(i+1) >> (8 * b))
		}
		l.Runs[i], l.Leaves[i] = id, sha256.Sum256(id[:])
	}
	rec := recorder{MemStore: l.Tree, nodes: &l.Nodes}
	const chunk = 1 << 16
	for lo := 0; lo < n; lo += chunk {
		root, err := log.Append(ctx, rec, uint64(lo), l.Leaves[lo:min(lo+chunk, n)]...)
		if err != nil {
			return nil, err
		}
		l.Root = root
	}
	slices.SortFunc(l.Nodes, func(a, b log.Node) int {
		return cmp.Or(cmp.Compare(a.ID.Level, b.ID.Level), cmp.Compare(a.ID.Index, b.ID.Index))
	})
	return l, nil
}

// recorder is a MemStore that also keeps every node written, for a
// builder to write in bulk. Append writes each node once.
type recorder struct {
	*log.MemStore
	nodes *[]log.Node
}

func (r recorder) WriteNodes(ctx context.Context, ns []log.Node) error {
	*r.nodes = append(*r.nodes, ns...)
	return r.MemStore.WriteNodes(ctx, ns)
}
