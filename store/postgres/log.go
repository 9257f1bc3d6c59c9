package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/transparency-dev/merkle/compact"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// querier is what a connection and a transaction share.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// nodes is one tenant's Merkle log node store, read inside whatever
// transaction q is. A seal's nodes are not written at once but queued on
// the batch that carries its COMMIT, so the leaf and its run's seal commit
// together or not at all.
type nodes struct {
	q      querier
	tenant string
	sql    *queries
	queue  *pgx.Batch // nil: read-only
}

// ReadNodes implements log.NodeReader in one query.
func (n nodes) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]log.Hash, error) {
	if len(ids) == 0 {
		return []log.Hash{}, nil
	}
	levels := make([]int32, len(ids))
	idxs := make([]int64, len(ids))
	for i, id := range ids {
		if id.Index > 1<<62 {
			return nil, &log.NodeNotFoundError{ID: id}
		}
		levels[i], idxs[i] = int32(id.Level), int64(id.Index)
	}
	rows, err := n.q.Query(ctx, n.sql.readNodes, n.tenant, levels, idxs)
	if err != nil {
		return nil, fmt.Errorf("read log nodes: %w", err)
	}
	defer rows.Close()
	got := make(map[compact.NodeID]log.Hash, len(ids))
	for rows.Next() {
		var level int32
		var idx int64
		var h []byte
		if err := rows.Scan(&level, &idx, &h); err != nil {
			return nil, fmt.Errorf("read log nodes: %w", err)
		}
		if len(h) != 32 {
			return nil, &store.CorruptError{Detail: fmt.Sprintf("log node (%d, %d) is %d bytes", level, idx, len(h))}
		}
		got[compact.NewNodeID(uint(level), uint64(idx))] = log.Hash(h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read log nodes: %w", err)
	}
	out := make([]log.Hash, len(ids))
	for i, id := range ids {
		h, ok := got[id]
		if !ok {
			return nil, &log.NodeNotFoundError{ID: id}
		}
		out[i] = h
	}
	return out, nil
}

// WriteNodes implements log.NodeWriter by queuing one statement on the
// seal's commit batch. Rewriting a node with its own hash is harmless; with
// another hash the statement fails (see writeNodes), the transaction with it.
func (n nodes) WriteNodes(ctx context.Context, ns []log.Node) error {
	if n.queue == nil {
		return errors.New("log nodes: read-only")
	}
	if len(ns) == 0 {
		return nil
	}
	levels := make([]int32, len(ns))
	idxs := make([]int64, len(ns))
	hashes := make([][]byte, len(ns))
	for i, nd := range ns {
		levels[i], idxs[i] = int32(nd.ID.Level), int64(nd.ID.Index)
		h := nd.Hash
		hashes[i] = h[:]
	}
	n.queue.Queue(n.sql.writeNodes, n.tenant, levels, idxs, hashes)
	return nil
}

// nodeConflict maps the failure of a queued node write: the only way it
// fails on a sound database is a stored node with another hash, which
// means the stored log is not the one this seal extends.
func nodeConflict(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23502" { // not_null_violation: see writeNodes
		return &store.CorruptError{Detail: "a stored Merkle log node differs from the one this seal computes: the stored log was altered"}
	}
	return nil
}

// appendLeaves computes the Merkle nodes that add leaves at index and
// onwards to the tenant's tree, reading inside x's transaction, and queues
// their write on b.
func (s *Store) appendLeaves(ctx context.Context, x *session, b *pgx.Batch, index uint64, leaves ...log.Hash) error {
	w := nodes{q: x.conn, tenant: s.tenant, sql: &s.q, queue: b}
	if _, err := log.Append(ctx, w, index, leaves...); err != nil {
		var nf *log.NodeNotFoundError
		if errors.As(err, &nf) {
			return &store.CorruptError{Detail: fmt.Sprintf("append leaf %d: %v", index, err)}
		}
		return notWritten(fmt.Errorf("append leaf %d: %w", index, err))
	}
	return nil
}

// logSnapshot runs fn in a REPEATABLE READ read-only transaction with the
// log's size as of its snapshot, so what fn reads and the size agree.
func (s *Store) logSnapshot(ctx context.Context, fn func(tx pgx.Tx, r nodes, size uint64) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var size int64
	if err := tx.QueryRow(ctx, s.q.logSize, s.tenant).Scan(&size); err != nil {
		return fmt.Errorf("read log size: %w", err)
	}
	if size < 0 {
		return &store.CorruptError{Detail: "negative log size"}
	}
	if err := fn(tx, nodes{q: tx, tenant: s.tenant, sql: &s.q}, uint64(size)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Checkpoint implements store.Journal.
func (s *Store) Checkpoint(ctx context.Context) (store.Checkpoint, error) {
	size, err := s.committedSize(ctx)
	if err != nil {
		return store.Checkpoint{}, s.readErr("checkpoint", err)
	}
	root, err := log.Root(ctx, s.proofNodes(size), size)
	if err != nil {
		return store.Checkpoint{}, s.readErr("checkpoint", fmt.Errorf("log root at %d: %w", size, err))
	}
	return store.Checkpoint{Origin: s.Origin(), Size: size, Root: store.Digest(root)}, nil
}

// ConsistencyProof implements store.Journal. Like every proof it takes no
// snapshot (see proofread.go): the size and the nodes the cache misses, in
// one statement.
func (s *Store) ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	if oldSize > newSize {
		return nil, &store.InvalidArgumentError{Field: "old_size", Detail: fmt.Sprintf("%d is above the new size %d", oldSize, newSize)}
	}
	ids, err := log.ConsistencyNodes(oldSize, newSize)
	if err != nil {
		return nil, s.readErr("consistency proof", err)
	}
	size, ahead, err := s.sizeAndNodes(ctx, s.nodeCache.Missing(ids))
	if err != nil {
		return nil, s.readErr("consistency proof", err)
	}
	if newSize > size {
		return nil, store.BeyondLog("new_size", newSize, size)
	}
	p, err := log.ConsistencyProof(ctx, s.proofReader(size, ahead), oldSize, newSize)
	if err != nil {
		return nil, s.readErr("consistency proof", fmt.Errorf("consistency proof %d..%d: %w", oldSize, newSize, err))
	}
	return store.Digests(p), nil
}

// InclusionProof implements store.Journal.
func (s *Store) InclusionProof(ctx context.Context, run store.RunID) (*store.Inclusion, error) {
	return s.inclusion(ctx, run, nil)
}

// InclusionProofAt implements store.Journal; the log keeps every completed
// subtree, so it answers at any past size.
func (s *Store) InclusionProofAt(ctx context.Context, run store.RunID, size uint64) (*store.Inclusion, error) {
	return s.inclusion(ctx, run, &size)
}

// inclusion reads the size, the run and the nodes below the cache's floor
// in one statement (see proofread.go); nodes cannot change after.
func (s *Store) inclusion(ctx context.Context, run store.RunID, at *uint64) (*store.Inclusion, error) {
	in, err := s.runInLog(ctx, run, at)
	if err != nil {
		return nil, s.readErr("inclusion proof of run "+run.String(), err)
	}
	inc, err := in.Inclusion(ctx, run, at, s.proofReader(in.Size, in.Ahead))
	if err != nil {
		return nil, s.readErr("inclusion proof of run "+run.String(), err)
	}
	return inc, nil
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
	found := map[string]store.Position{}
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
		found[id] = store.Position{Index: uint64(index), Leaf: store.Digest(leaf)}
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("log positions", err)
	}
	out := make([]*store.Position, len(runs))
	for i, id := range ids {
		if p, ok := found[id]; ok {
			out[i] = &p
		}
	}
	return out, nil
}
