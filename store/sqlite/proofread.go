package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
	"github.com/transparency-dev/merkle/compact"
)

// DefaultNodeCacheBytes is the default bound on one tenant's cache of log
// nodes: the levels from 3 up of a log of a million sealed runs.
const DefaultNodeCacheBytes = 16 << 20

// proofReads is what the log's read paths (proofs, checkpoints) keep across
// calls: statements prepared on the read pool, and each tenant's cache of
// upper tree nodes. Proofs read outside any transaction: every node of the
// tree of a committed size was committed with that size or before it, and a
// stored node never changes, so the size read first and the nodes read after
// agree without a snapshot.
type proofReads struct {
	mu         sync.Mutex
	closed     bool
	stmts      map[string]*sql.Stmt
	caches     map[string]*log.NodeCache // by tenant
	cacheBytes int64
	// fills is the context of the caches' background fills, cancelled
	// when the file closes.
	fills    context.Context
	stopFill context.CancelFunc
	// stmts counts the statements proofs run (ProofRoundTrips).
	proofStmts atomic.Uint64
}

// proofNodeChunk is the most nodes one prepared node query reads, so that
// at most this many statement shapes are ever prepared.
const proofNodeChunk = 64

const (
	// qRunInLog reads, in one statement, a first row with the committed
	// size, the run's position and its leaf (a row even for an unknown
	// run), then one row per stored node among the run's level-0 node (so
	// that a proof is never built for a leaf the stored tree does not hold,
	// as on PostgreSQL), the siblings of its path and the right border of
	// the tree of size ?4 (the committed size when NULL), on the levels
	// below ?3, the node cache's floor: a superset of what the proof reads
	// below the floor, so that it reads nothing more from the file. The
	// CROSS JOIN keeps the few wanted nodes as the outer loop, each a
	// primary-key lookup. x^1 is written (x|1)-(x&1): SQLite has no XOR.
	qRunInLog = `WITH RECURSIVE lv(l) AS (SELECT 0 WHERE ?3 > 0 UNION ALL SELECT l+1 FROM lv WHERE l+1 < ?3),
		s(size) AS (SELECT coalesce((SELECT size FROM logs WHERE tenant=?1), 0)),
		r(log_index, leaf) AS (SELECT log_index, leaf FROM runs WHERE tenant=?1 AND run=?2),
		t(size) AS (SELECT coalesce(?4, size) FROM s),
		w(level, idx) AS (
			SELECT 0, log_index FROM r WHERE log_index IS NOT NULL
			UNION SELECT l, ((log_index >> l) | 1) - ((log_index >> l) & 1) FROM r, lv WHERE log_index IS NOT NULL
			UNION SELECT l, (t.size >> l) - 1 FROM t, lv WHERE ((t.size >> l) & 1) = 1)
		SELECT s.size, r.log_index, r.leaf, NULL, NULL, NULL FROM s LEFT JOIN r ON 1
		UNION ALL
		SELECT NULL, NULL, NULL, n.level, n.idx, n.hash FROM w CROSS JOIN log_nodes n
			WHERE n.tenant=?1 AND n.level=w.level AND n.idx=w.idx`
	qCommitSize = `SELECT coalesce((SELECT size FROM logs WHERE tenant=?), 0)`
)

// readStmt returns query prepared on the read pool, preparing it once.
func (f *file) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	p := &f.proofs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, store.ErrClosed
	}
	if st := p.stmts[query]; st != nil {
		return st, nil
	}
	st, err := f.rdb.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if p.stmts == nil {
		p.stmts = map[string]*sql.Stmt{}
	}
	p.stmts[query] = st
	return st, nil
}

// closeProofReads stops the caches' background fills and waits for them,
// so that none reads the file after it closes, then closes the prepared
// statements; later reads get store.ErrClosed.
func (f *file) closeProofReads() error {
	p := &f.proofs
	p.mu.Lock()
	p.closed = true
	if p.stopFill != nil {
		p.stopFill()
	}
	caches := make([]*log.NodeCache, 0, len(p.caches))
	for _, c := range p.caches {
		caches = append(caches, c)
	}
	p.mu.Unlock()
	// Without p.mu: a fill's reads take it (and now fail as closed).
	for _, c := range caches {
		c.StopFill()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, st := range p.stmts {
		errs = append(errs, st.Close())
	}
	p.stmts = nil
	return errors.Join(errs...)
}

// nodeCache is this tenant's node cache, shared by every handle of the file.
func (s *Store) nodeCache() *log.NodeCache {
	p := &s.proofs
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.caches[s.tenant]
	if c == nil {
		if p.caches == nil {
			p.caches = map[string]*log.NodeCache{}
		}
		n := p.cacheBytes
		if n == 0 {
			n = DefaultNodeCacheBytes
		}
		c = log.NewNodeCache(n)
		p.caches[s.tenant] = c
		if p.fills == nil {
			p.fills, p.stopFill = context.WithCancel(context.Background())
		}
		if p.closed {
			c.StopFill()
		}
	}
	return c
}

// fillContext is the context of this file's background cache fills
// (nodeCache made it).
func (s *Store) fillContext() context.Context {
	p := &s.proofs
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fills
}

// NodeCacheStats reports this tenant's node cache: how many node reads of
// proofs and roots it answered, how many went to the file.
func (s *Store) NodeCacheStats() log.CacheStats { return s.nodeCache().Stats() }

// proofNodes is the node reader of the log's read paths for a tree of
// size leaves, committed: the tenant's cache in front of prepared
// primary-key reads on the read pool.
// The first use starts filling the cache's levels in the background.
func (s *Store) proofNodes(size uint64) log.NodeReader {
	return s.proofReader(size, nil)
}

// proofReader is proofNodes with ahead answered first among the cache's
// misses: nodes a proof's statement read with the size (log.Ahead).
func (s *Store) proofReader(size uint64, ahead []log.Node) log.NodeReader {
	c := s.nodeCache()
	if !s.warm.reading.Load() { // else the warm starts it (warm.go)
		c.FillInBackground(s.fillContext(), log.RangeOf(s.LogNodes), size)
	}
	var r log.NodeReader = poolNodes{s}
	if ahead != nil {
		r = log.Ahead(ahead, countedNodes{s})
	}
	return c.Reader(r, size)
}

// ProofRoundTrips is how many statements the inclusion and consistency
// proofs of this file have run since it was opened (SQLite has no server
// to go round to; each is a call into the database engine): one per
// inclusion proof and two per consistency proof once the cache is warm.
func (s *Store) ProofRoundTrips() uint64 { return s.proofs.proofStmts.Load() }

// countedNodes is poolNodes behind log.Ahead, counted as a proof's
// statements.
type countedNodes struct{ s *Store }

func (n countedNodes) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]log.Hash, error) {
	n.s.proofs.proofStmts.Add(uint64((len(ids) + proofNodeChunk - 1) / proofNodeChunk))
	return poolNodes(n).ReadNodes(ctx, ids)
}

// WarmNodeCache waits until this tenant's node cache holds every level it
// keeps for the log's current size, starting the fill if no proof has.
// Proofs do not need it; a benchmark of steady-state proofs does.
func (s *Store) WarmNodeCache(ctx context.Context) error {
	size, err := s.committedSize(ctx)
	if err != nil {
		return err
	}
	c := s.nodeCache()
	select {
	case <-c.FillInBackground(s.fillContext(), log.RangeOf(s.LogNodes), size):
	case <-ctx.Done():
		return ctx.Err()
	}
	// A fill started at a smaller size leaves the newer nodes to this one.
	return c.Fill(ctx, log.RangeOf(s.LogNodes), size)
}

// poolNodes reads committed nodes through prepared statements on the read
// pool, proofNodeChunk nodes a statement.
type poolNodes struct{ s *Store }

func (n poolNodes) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]log.Hash, error) {
	return readNodes(ctx, ids, proofNodeChunk, func(part []compact.NodeID, args []any) (*sql.Rows, error) {
		st, err := n.s.readStmt(ctx, nodesQuery(len(part)))
		if err != nil {
			return nil, err
		}
		return st.QueryContext(ctx, args...)
	}, n.s.tenant)
}

// committedSize is the log's size now, read on the read pool.
func (s *Store) committedSize(ctx context.Context) (uint64, error) {
	st, err := s.readStmt(ctx, qCommitSize)
	if err != nil {
		return 0, fmt.Errorf("read log size: %w", err)
	}
	var n int64
	if err := st.QueryRowContext(ctx, s.tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("read log size: %w", err)
	}
	if n < 0 {
		return 0, &store.CorruptError{Detail: "negative log size"}
	}
	return uint64(n), nil
}

// runInLog reads the log's committed size, the run's position in it and
// the nodes below the cache's floor that an inclusion proof of it at size
// at (nil: the committed size) may need, in one statement.
func (s *Store) runInLog(ctx context.Context, run store.RunID, at *uint64) (store.RunInLog, error) {
	var out store.RunInLog
	st, err := s.readStmt(ctx, qRunInLog)
	if err != nil {
		return out, fmt.Errorf("read run %s: %w", run, err)
	}
	var atSize any // NULL: the committed size
	if at != nil && *at <= math.MaxInt64 {
		atSize = int64(*at)
	}
	s.proofs.proofStmts.Add(1)
	rows, err := st.QueryContext(ctx, s.tenant, run.String(), int64(s.nodeCache().Floor()), atSize)
	if err != nil {
		return out, fmt.Errorf("read run %s: %w", run, err)
	}
	defer rows.Close()
	var head bool
	var n int64
	var idx *int64
	var l []byte
	for rows.Next() {
		var rn, ridx, level, nidx sql.NullInt64
		var rl, h []byte
		if err := rows.Scan(&rn, &ridx, &rl, &level, &nidx, &h); err != nil {
			return out, fmt.Errorf("read run %s: %w", run, err)
		}
		if rn.Valid {
			head, n, l = true, rn.Int64, rl
			if ridx.Valid {
				idx = &ridx.Int64
			}
			continue
		}
		if !level.Valid || !nidx.Valid || level.Int64 < 0 || level.Int64 > 63 || nidx.Int64 < 0 || len(h) != 32 {
			return out, &store.CorruptError{Detail: fmt.Sprintf("log node (%d, %d) is malformed", level.Int64, nidx.Int64)}
		}
		out.Ahead = append(out.Ahead, log.Node{ID: compact.NewNodeID(uint(level.Int64), uint64(nidx.Int64)), Hash: log.Hash(h)})
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("read run %s: %w", run, err)
	}
	if !head {
		return out, &store.CorruptError{Detail: "no valid log size"}
	}
	return out, out.SetRead(run, n, idx, l)
}

// RoundTrip runs the store's cheapest statement, the log's size read: one
// call into the engine and no proof work, the ceiling a benchmark measures
// one-statement proofs beside.
func (s *Store) RoundTrip(ctx context.Context) error {
	_, err := s.committedSize(ctx)
	return err
}
