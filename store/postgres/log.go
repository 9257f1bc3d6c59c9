package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// appendLeaf queues, on b, the writes that add leaf at index to the
// tenant's Merkle log, inside the seal's transaction. The Merkle nodes
// arrive with the log package; until then only the leaf's index and value
// are recorded (on the run's row, by the seal).
func (s *Store) appendLeaf(ctx context.Context, x *session, b *pgx.Batch, index uint64, leaf store.Digest) error {
	_, _, _, _, _ = ctx, x, b, index, leaf
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

// LogPositions implements store.Journal, in one query for all the runs.
func (s *Store) LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if len(runs) > store.MaxLimit {
		return nil, &store.InvalidArgumentError{Field: "runs", Detail: fmt.Sprintf("%d runs; at most %d per call", len(runs), store.MaxLimit)}
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.String()
	}
	rows, err := s.pool.Query(ctx, s.q.positions, s.tenant, ids)
	if err != nil {
		return nil, s.readErr("log positions", err)
	}
	defer rows.Close()
	found := map[string]*store.Position{}
	for rows.Next() {
		var id string
		var index int64
		var leaf []byte
		if err := rows.Scan(&id, &index, &leaf); err != nil {
			return nil, s.readErr("log positions", err)
		}
		run, err := parseRun(id)
		if err != nil {
			return nil, err
		}
		if index < 0 || len(leaf) != 32 {
			return nil, &store.CorruptError{Run: run, Detail: "stored log position is malformed"}
		}
		found[id] = &store.Position{Index: uint64(index), Leaf: store.Digest(leaf)}
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("log positions", err)
	}
	out := make([]*store.Position, len(runs))
	for i, id := range ids {
		if p, ok := found[id]; ok {
			q := *p
			out[i] = &q
		}
	}
	return out, nil
}
