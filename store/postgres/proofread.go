package postgres

import (
	"context"
	"fmt"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// DefaultNodeCacheBytes is the default bound on a Store's cache of upper
// log nodes: the levels from 2 up of a log of a million sealed runs.
const DefaultNodeCacheBytes = 16 << 20

// The log's read paths (proofs, roots) read outside any transaction: every
// node of the tree of a committed size was committed with that size or
// before it, and a stored node never changes, so a size read first and the
// nodes read after agree without a snapshot. That saves a proof the BEGIN
// and COMMIT round trips, and lets the nodes come from the Store's cache,
// which is filled only from committed reads.

// qRunInLog is, in one round trip, the committed size, the run's position
// and the stored hash of its leaf: a row even for an unknown run.
const qRunInLog = `SELECT coalesce((SELECT size FROM {S}.logs WHERE tenant = $1), 0), r.log_index, r.leaf, n.hash
	FROM (SELECT 1) one
	LEFT JOIN {S}.runs r ON r.tenant = $1 AND r.run = $2
	LEFT JOIN {S}.log_nodes n ON n.tenant = $1 AND n.level = 0 AND n.idx = r.log_index`

// proofNodes is the node reader of the read paths for a tree of size
// leaves, committed: the cache in front of the pool.
// The first use starts filling the cache's levels in the background.
func (s *Store) proofNodes(size uint64) log.NodeReader {
	s.nodeCache.FillInBackground(s.fills, log.RangeOf(s.LogNodes), size)
	return s.nodeCache.Reader(nodes{q: s.pool, tenant: s.tenant, sql: &s.q}, size)
}

// WarmNodeCache waits until the node cache holds every level it keeps for
// the log's current size, starting the fill if no proof has. Proofs do not
// need it; a benchmark of steady-state proofs does.
func (s *Store) WarmNodeCache(ctx context.Context) error {
	size, err := s.committedSize(ctx)
	if err != nil {
		return err
	}
	select {
	case <-s.nodeCache.FillInBackground(s.fills, log.RangeOf(s.LogNodes), size):
	case <-ctx.Done():
		return ctx.Err()
	}
	// A fill started at a smaller size leaves the newer nodes to this one.
	return s.nodeCache.Fill(ctx, log.RangeOf(s.LogNodes), size)
}

// NodeCacheStats reports the Store's node cache: how many node reads of
// proofs and roots it answered, how many went to the database.
func (s *Store) NodeCacheStats() log.CacheStats { return s.nodeCache.Stats() }

// committedSize is the log's size now.
func (s *Store) committedSize(ctx context.Context) (uint64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	var size int64
	if err := s.pool.QueryRow(ctx, s.q.logSize, s.tenant).Scan(&size); err != nil {
		return 0, fmt.Errorf("read log size: %w", err)
	}
	if size < 0 {
		return 0, &store.CorruptError{Detail: "negative log size"}
	}
	return uint64(size), nil
}

// runInLog is the log's committed size and run's position in it, sealed
// false when the run is unknown or not sealed. The stored leaf hash must
// be the hash of the run's leaf, so that a swapped leaf row is caught here
// and not by the auditor.
func (s *Store) runInLog(ctx context.Context, run store.RunID) (size, index uint64, leaf log.Hash, sealed bool, err error) {
	if err := s.check(ctx); err != nil {
		return 0, 0, leaf, false, err
	}
	var n int64
	var idx *int64
	var l, lh []byte
	if err := s.pool.QueryRow(ctx, s.q.runInLog, s.tenant, run.String()).Scan(&n, &idx, &l, &lh); err != nil {
		return 0, 0, leaf, false, fmt.Errorf("read run %s: %w", run, err)
	}
	if n < 0 {
		return 0, 0, leaf, false, &store.CorruptError{Detail: "negative log size"}
	}
	if idx == nil || *idx >= n {
		return uint64(n), 0, leaf, false, nil
	}
	if *idx < 0 || len(l) != 32 {
		return 0, 0, leaf, false, &store.CorruptError{Run: run, Detail: "sealed run has no 32-byte leaf"}
	}
	if lh == nil {
		return 0, 0, leaf, false, &store.CorruptError{Run: run, Detail: fmt.Sprintf("log leaf %d is missing", *idx)}
	}
	if want := log.LeafHash(log.Hash(l)); string(lh) != string(want[:]) {
		return 0, 0, leaf, false, &store.CorruptError{Run: run, Detail: fmt.Sprintf("log leaf %d is not the hash of the run's sealed leaf", *idx)}
	}
	return uint64(n), uint64(*idx), log.Hash(l), true, nil
}
