package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/runseal/runseal/store"
)

// appendLeaf stores the leaf at index; the Merkle nodes arrive with the log
// package.
func (s *Store) appendLeaf(ctx context.Context, tx *sql.Tx, index uint64, leaf store.Digest) error {
	_ = ctx
	_ = tx
	_ = index
	_ = leaf
	return nil
}

// Checkpoint implements store.Journal.
func (s *Store) Checkpoint(ctx context.Context) (store.Checkpoint, error) {
	return store.Checkpoint{}, fmt.Errorf("checkpoint: %w", store.ErrNotSupported)
}

// ConsistencyProof implements store.Journal.
func (s *Store) ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	return nil, fmt.Errorf("consistency proof: %w", store.ErrNotSupported)
}

// InclusionProof implements store.Journal.
func (s *Store) InclusionProof(ctx context.Context, run store.RunID) (*store.Inclusion, error) {
	return nil, fmt.Errorf("inclusion proof: %w", store.ErrNotSupported)
}

// InclusionProofAt implements store.Journal.
func (s *Store) InclusionProofAt(ctx context.Context, run store.RunID, size uint64) (*store.Inclusion, error) {
	return nil, fmt.Errorf("inclusion proof: %w", store.ErrNotSupported)
}

// LogPositions implements store.Journal.
func (s *Store) LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error) {
	out := make([]*store.Position, len(runs))
	for i, run := range runs {
		st, err := s.loadRun(ctx, s.rdb, run)
		if err != nil {
			return nil, err
		}
		if st.logIndex.Valid {
			out[i] = &store.Position{Index: uint64(st.logIndex.Int64), Leaf: store.Digest(st.leaf)}
		}
	}
	return out, nil
}
