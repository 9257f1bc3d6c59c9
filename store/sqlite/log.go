package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
	"github.com/transparency-dev/merkle/compact"
)

// nodes is the Merkle log's node store for one tenant, read and written
// inside whatever transaction q is, so a seal and its leaf commit together.
type nodes struct {
	q      querier
	exec   func(ctx context.Context, query string, args ...any) (sql.Result, error)
	tenant string
}

// ReadNodes implements log.NodeReader. All the nodes of one call (a
// proof's, a root's) come back from one query: a proof at 10^6 leaves reads
// about 25 nodes, and one statement each would be most of its latency.
func (n nodes) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]log.Hash, error) {
	return readNodes(ctx, ids, nodeChunk, func(part []compact.NodeID, args []any) (*sql.Rows, error) {
		return n.q.QueryContext(ctx, nodesQuery(len(part)), args...)
	}, n.tenant)
}

// nodeChunk is the most nodes one query asks for: two values a node, well
// under SQLite's bound on parameters.
const nodeChunk = 400

// nodesQuery reads k nodes of a tenant by primary key.
func nodesQuery(k int) string {
	return `SELECT level, idx, hash FROM log_nodes WHERE tenant=? AND (level, idx) IN (VALUES (?,?)` + strings.Repeat(",(?,?)", k-1) + `)`
}

// readNodes reads ids in queries of at most chunk nodes each, run by query,
// and checks that every node came back, 32 bytes long.
func readNodes(ctx context.Context, ids []compact.NodeID, chunk int, query func(part []compact.NodeID, args []any) (*sql.Rows, error), tenant string) ([]log.Hash, error) {
	out := make([]log.Hash, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	found := make(map[compact.NodeID][]byte, len(ids))
	args := make([]any, 0, 1+2*min(chunk, len(ids)))
	for lo := 0; lo < len(ids); lo += chunk {
		part := ids[lo:min(lo+chunk, len(ids))]
		args = append(args[:0], tenant)
		for _, id := range part {
			args = append(args, int64(id.Level), int64(id.Index))
		}
		rows, err := query(part, args)
		if err != nil {
			return nil, fmt.Errorf("read log nodes: %w", err)
		}
		for rows.Next() {
			var level, idx int64
			var h []byte
			if err := rows.Scan(&level, &idx, &h); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read log nodes: %w", err)
			}
			found[compact.NodeID{Level: uint(level), Index: uint64(idx)}] = h
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read log nodes: %w", err)
		}
	}
	for i, id := range ids {
		h, ok := found[id]
		if !ok {
			return nil, &log.NodeNotFoundError{ID: id}
		}
		if len(h) != 32 {
			return nil, &store.CorruptError{Detail: fmt.Sprintf("log node (%d, %d) is %d bytes", id.Level, id.Index, len(h))}
		}
		out[i] = log.Hash(h)
	}
	return out, nil
}

// WriteNodes implements log.NodeWriter: rewriting a node with its own hash
// is harmless, with another hash a conflict.
func (n nodes) WriteNodes(ctx context.Context, ns []log.Node) error {
	for _, nd := range ns {
		res, err := n.exec(ctx, `INSERT INTO log_nodes(tenant, level, idx, hash) VALUES(?,?,?,?) ON CONFLICT DO NOTHING`,
			n.tenant, int64(nd.ID.Level), int64(nd.ID.Index), nd.Hash[:])
		if err != nil {
			return fmt.Errorf("write log node: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 1 {
			continue
		}
		have, err := n.ReadNodes(ctx, []compact.NodeID{nd.ID})
		if err != nil {
			return err
		}
		if have[0] != nd.Hash {
			return &log.NodeConflictError{ID: nd.ID, Stored: have[0], Written: nd.Hash}
		}
	}
	return nil
}

// appendLeaf adds leaf at index to the tenant's tree inside tx.
func (s *Store) appendLeaf(ctx context.Context, tx *sql.Tx, index uint64, leaf store.Digest) error {
	w := nodes{q: tx, exec: tx.ExecContext, tenant: s.tenant}
	if _, err := log.Append(ctx, w, index, log.Hash(leaf)); err != nil {
		return fmt.Errorf("append leaf %d: %w", index, err)
	}
	return nil
}

// readTx runs fn in one read snapshot.
func (s *Store) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

func (s *Store) reader(tx *sql.Tx) nodes { return nodes{q: tx, tenant: s.tenant} }

// Checkpoint implements store.Journal.
func (s *Store) Checkpoint(ctx context.Context) (store.Checkpoint, error) {
	size, err := s.committedSize(ctx)
	if err != nil {
		return store.Checkpoint{}, err
	}
	root, err := log.Root(ctx, s.proofNodes(size), size)
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("log root at %d: %w", size, err)
	}
	return store.Checkpoint{Origin: s.Origin(), Size: size, Root: store.Digest(root)}, nil
}

// ConsistencyProof implements store.Journal. Like every proof it reads no
// snapshot (see proofReads): the size first, then nodes that cannot change.
func (s *Store) ConsistencyProof(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	if oldSize > newSize {
		return nil, &store.InvalidArgumentError{Field: "old_size", Detail: fmt.Sprintf("%d is above the new size %d", oldSize, newSize)}
	}
	s.proofs.proofStmts.Add(1)
	size, err := s.committedSize(ctx)
	if err != nil {
		return nil, err
	}
	if newSize > size {
		return nil, store.BeyondLog("new_size", newSize, size)
	}
	p, err := log.ConsistencyProof(ctx, s.proofReader(size, []log.Node{}), oldSize, newSize)
	if err != nil {
		return nil, fmt.Errorf("consistency proof %d..%d: %w", oldSize, newSize, err)
	}
	return store.Digests(p), nil
}

// InclusionProof implements store.Journal.
func (s *Store) InclusionProof(ctx context.Context, run store.RunID) (*store.Inclusion, error) {
	return s.inclusion(ctx, run, nil)
}

// InclusionProofAt implements store.Journal; the log holds every completed
// subtree, so it answers at any past size.
func (s *Store) InclusionProofAt(ctx context.Context, run store.RunID, size uint64) (*store.Inclusion, error) {
	return s.inclusion(ctx, run, &size)
}

// inclusion reads the size, the run and the nodes below the cache's floor
// in one statement (see qRunInLog); nodes cannot change after.
func (s *Store) inclusion(ctx context.Context, run store.RunID, at *uint64) (*store.Inclusion, error) {
	in, err := s.runInLog(ctx, run, at)
	if err != nil {
		return nil, err
	}
	return in.Inclusion(ctx, run, at, s.proofReader(in.Size, in.Ahead))
}

// LogPositions implements store.Journal, in one read snapshot with one query
// per few hundred runs.
func (s *Store) LogPositions(ctx context.Context, runs []store.RunID) ([]*store.Position, error) {
	out := make([]*store.Position, len(runs))
	where := map[store.RunID][]int{}
	for i, r := range runs {
		where[r] = append(where[r], i)
	}
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		const chunk = 500
		for lo := 0; lo < len(runs); lo += chunk {
			hi := min(lo+chunk, len(runs))
			args := []any{s.tenant}
			for _, r := range runs[lo:hi] {
				args = append(args, r.String())
			}
			rows, err := tx.QueryContext(ctx, `SELECT run, log_index, leaf FROM runs WHERE tenant=? AND log_index IS NOT NULL AND run IN (?`+
				strings.Repeat(",?", hi-lo-1)+`)`, args...)
			if err != nil {
				return fmt.Errorf("log positions: %w", err)
			}
			for rows.Next() {
				var id string
				var idx int64
				var leaf []byte
				if err := rows.Scan(&id, &idx, &leaf); err != nil {
					rows.Close()
					return err
				}
				r, err := parseRun(id)
				if err != nil {
					rows.Close()
					return err
				}
				if len(leaf) != 32 || idx < 0 {
					rows.Close()
					return &store.CorruptError{Run: r, Detail: "malformed log position"}
				}
				for _, i := range where[r] {
					out[i] = &store.Position{Index: uint64(idx), Leaf: store.Digest(leaf)}
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}
