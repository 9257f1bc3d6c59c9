package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

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
}

// proofNodeChunk is the most nodes one prepared node query reads, so that
// at most this many statement shapes are ever prepared.
const proofNodeChunk = 64

const (
	// qRunInLog reads the committed size, then the run's position, in one
	// statement (a row even for an unknown run).
	// qRunInLog also reads the run's stored level-0 node, so that a proof
	// is never built for a leaf the stored tree does not hold (as on
	// PostgreSQL).
	qRunInLog = `SELECT coalesce((SELECT size FROM logs WHERE tenant=?1), 0), r.log_index, r.leaf, n.hash FROM (SELECT 1)
		LEFT JOIN runs r ON r.tenant=?1 AND r.run=?2
		LEFT JOIN log_nodes n ON n.tenant=?1 AND n.level=0 AND n.idx=r.log_index`
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
	c := s.nodeCache()
	c.FillInBackground(s.fillContext(), log.RangeOf(s.LogNodes), size)
	return c.Reader(poolNodes{s}, size)
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

// runInLog is the log's committed size and run's position in the log: ok
// false when the run is unknown or not sealed.
func (s *Store) runInLog(ctx context.Context, run store.RunID) (size, index uint64, leaf log.Hash, ok bool, err error) {
	st, err := s.readStmt(ctx, qRunInLog)
	if err != nil {
		return 0, 0, leaf, false, fmt.Errorf("read run %s: %w", run, err)
	}
	var n int64
	var idx sql.NullInt64
	var l, lh []byte
	if err := st.QueryRowContext(ctx, s.tenant, run.String()).Scan(&n, &idx, &l, &lh); err != nil {
		return 0, 0, leaf, false, fmt.Errorf("read run %s: %w", run, err)
	}
	if n < 0 {
		return 0, 0, leaf, false, &store.CorruptError{Detail: "negative log size"}
	}
	if !idx.Valid || idx.Int64 >= n {
		return uint64(n), 0, leaf, false, nil
	}
	if idx.Int64 < 0 || len(l) != 32 {
		return 0, 0, leaf, false, &store.CorruptError{Run: run, Detail: "malformed log position"}
	}
	if lh == nil {
		return 0, 0, leaf, false, &store.CorruptError{Run: run, Detail: fmt.Sprintf("log leaf %d is missing", idx.Int64)}
	}
	if want := log.LeafHash(log.Hash(l)); string(lh) != string(want[:]) {
		return 0, 0, leaf, false, &store.CorruptError{Run: run, Detail: fmt.Sprintf("log leaf %d is not the hash of the run's sealed leaf", idx.Int64)}
	}
	return uint64(n), uint64(idx.Int64), log.Hash(l), true, nil
}
