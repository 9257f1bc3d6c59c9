package store

import (
	"context"
	"fmt"

	"github.com/transparency-dev/merkle/compact"

	"github.com/runseal/runseal/log"
)

// RunInLog is what a backend's inclusion-proof statement read in one
// round trip: the log's committed size, the run's position and sealed
// leaf, and the log nodes it read ahead for the proof (see log.Ahead).
// Both backends fill it and build the proof with its Inclusion method, so
// the checks on what was read are written once.
type RunInLog struct {
	Size   uint64     // the log's committed size
	Index  uint64     // the run's log index; valid when Sealed
	Leaf   log.Hash   // the run's sealed leaf value; valid when Sealed
	Sealed bool       // false: the run is unknown, unsealed, or beyond Size
	Ahead  []log.Node // nodes read with the size, for log.Ahead
}

// SetRead records the statement's first row: the committed size (a
// negative one is corruption), and the run's log index and leaf, which
// are nil when the run is unknown or unsealed. A run whose index is at or
// beyond the size is not in the log yet (a seal committing now); a sealed
// run without a 32-byte leaf is corruption.
func (r *RunInLog) SetRead(run RunID, size int64, index *int64, leaf []byte) error {
	if size < 0 {
		return &CorruptError{Detail: "no valid log size"}
	}
	r.Size = uint64(size)
	if index == nil || *index >= size {
		return nil
	}
	if *index < 0 || len(leaf) != 32 {
		return &CorruptError{Run: run, Detail: "sealed run has no valid log index and 32-byte leaf"}
	}
	r.Index, r.Leaf, r.Sealed = uint64(*index), log.Hash(leaf), true
	return nil
}

// Inclusion is the run's inclusion proof at size at (nil: the committed
// size) from nodes, a reader that answers from r.Ahead first: nil when the
// run is not in the log at that size. r.Ahead must hold the run's leaf
// node as stored, and it must be the hash of the run's sealed leaf, so
// that a swapped or zeroed leaf row is caught here and not by the auditor.
func (r *RunInLog) Inclusion(ctx context.Context, run RunID, at *uint64, nodes log.NodeReader) (*Inclusion, error) {
	size, err := ProofSize(r.Size, at)
	if err != nil {
		return nil, err
	}
	if !r.Sealed || r.Index >= size {
		return nil, nil
	}
	// The leaf's node as the statement read it from the tables, not as a
	// cache in front of them may hold it.
	leaf := compact.NewNodeID(0, r.Index)
	found := false
	for _, n := range r.Ahead {
		if n.ID == leaf {
			if n.Hash != log.LeafHash(r.Leaf) {
				return nil, &CorruptError{Run: run, Detail: fmt.Sprintf("log leaf %d is not the hash of the run's sealed leaf", r.Index)}
			}
			found = true
		}
	}
	if !found {
		return nil, &CorruptError{Run: run, Detail: fmt.Sprintf("log leaf %d is missing", r.Index)}
	}
	p, err := log.InclusionProof(ctx, nodes, r.Index, size)
	if err != nil {
		return nil, fmt.Errorf("inclusion proof of run %s: %w", run, err)
	}
	return &Inclusion{Index: r.Index, Size: size, Leaf: Digest(r.Leaf), Proof: Digests(p)}, nil
}
