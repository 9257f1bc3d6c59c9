package postgres

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/transparency-dev/merkle/compact"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// DefaultNodeCacheBytes is the default bound on a Store's cache of log
// nodes: every level of a log of a million sealed runs (the levels from 1
// up at two million, from 2 up at four). A proof from a log the cache
// holds whole reads from the database only the size, and for an
// inclusion proof the run's position and its leaf node (one index-only
// scan each, proofindex.go): at 10^6 runs, on a server whose buffers are
// smaller than the tables, each node read from the database is a page
// read too, and the p99 of an inclusion proof reading three was over 1 ms.
// The cache takes only what the log needs.
const DefaultNodeCacheBytes = 64 << 20

// The log's read paths (proofs, roots) read outside any transaction: every
// node of the tree of a committed size was committed with that size or
// before it, and a stored node never changes, so a size read first and the
// nodes read after agree without a snapshot. That saves a proof the BEGIN
// and COMMIT round trips, and lets the nodes come from the Store's cache,
// which is filled only from committed reads.
//
// A proof costs one round trip once the cache is warm: one prepared
// statement reads the log's size (and, for an inclusion proof, the run's
// position and leaf) together with every node the proof needs below the
// cache's floor. An inclusion proof's nodes depend on the run's index, so
// its statement computes them itself: the siblings of the leaf's path and
// the log's right border, on each level below the floor (a superset of
// the proof's nodes there), and the leaf's own node for the cross-check.
// A consistency proof's nodes depend on the sizes alone, so it sends the
// ones the cache misses. A node neither fetched ahead nor cached (a cache
// still filling) costs one more round trip; Store.ProofRoundTrips counts
// them all.

// runInLogSQL is, in one round trip: a first row with the committed size,
// the run's position and its stored leaf (a row even for an unknown run),
// then the leaf's node as the log stores it (always: it is checked against
// the run's leaf, see store.RunInLog), then one row per stored node among
// the siblings of the leaf's path and the right border of the tree of size
// $3 (the committed size when NULL), on the levels below floor, the node
// cache's. The run and its level-0 nodes are index-only scans of covering
// indexes (proofindex.go): a leaf page of each, where the leaf's sibling
// is on the leaf's own page, and no heap page once the table's visibility
// map is set; "log_index IS NOT NULL" and the constant level 0 are what
// let the planner use the partial indexes. The levels below the floor are
// spelled out, one statement per floor (a floor changes only as the log
// grows by powers of two), so the plan has no parameter in its shape: the
// generic plan is the custom one and the prepared statement keeps it (a
// series up to a parameter was planned anew on every execution, 0.7 ms
// each), and the server does nothing but the index probes (a series
// filtered by a parameter and its de-duplication cost the server about as
// much as the probes). A border node that does not exist is a NULL index,
// which matches nothing; a node listed twice comes back twice, which
// log.Ahead does not mind.
func runInLogSQL(schema string, floor uint) string {
	var b strings.Builder
	b.WriteString(`WITH s AS (SELECT coalesce((SELECT size FROM {S}.logs WHERE tenant = $1), 0) AS size),
	r AS (SELECT log_index, leaf FROM {S}.runs WHERE tenant = $1 AND run = $2 AND log_index IS NOT NULL)`)
	if floor > 0 {
		b.WriteString(`,
	t AS (SELECT coalesce($3::bigint, s.size) AS size FROM s)`)
	}
	b.WriteString(`
	SELECT s.size, r.log_index, r.leaf, NULL::integer, NULL::bigint, NULL::bytea FROM s LEFT JOIN r ON true`)
	// Each node is its own probe, at a constant level (level 0 is what
	// lets the planner use log_leaves) and an index computed by a scalar
	// subquery (a parameter of the probe, NULL when the run is not
	// sealed): a join here was planned, for a tenant the statistics did
	// not know, as a scan of the tenant's nodes filtered by the join.
	node := func(level uint, idx string) {
		fmt.Fprintf(&b, `
	UNION ALL
	SELECT NULL, NULL, NULL, %d, n.idx, n.hash FROM {S}.log_nodes n WHERE n.tenant = $1 AND n.level = %d AND n.idx = (%s)`, level, level, idx)
	}
	node(0, `SELECT log_index FROM r`)
	for l := range floor {
		node(l, fmt.Sprintf(`SELECT (log_index >> %d) # 1 FROM r`, l))
		node(l, fmt.Sprintf(`SELECT CASE WHEN (size >> %d) & 1 = 1 THEN (size >> %d) - 1 END FROM t`, l, l))
	}
	return strings.ReplaceAll(b.String(), "{S}", pgx.Identifier{schema}.Sanitize())
}

// floorSQL is runInLogSQL for one floor, kept by the Store for the floor it
// last saw.
type floorSQL struct {
	floor uint
	sql   string
}

// runInLogStatement is runInLogSQL for the node cache's floor now.
func (s *Store) runInLogStatement() *floorSQL {
	floor := s.nodeCache.Floor()
	if f := s.inLogSQL.Load(); f != nil && f.floor == floor {
		return f
	}
	f := &floorSQL{floor: floor, sql: runInLogSQL(s.schema, floor)}
	s.inLogSQL.Store(f)
	return f
}

// sizeNodesSQL is, in one round trip, a first row with the committed size,
// then one row per stored node among the k (level, index) pairs $2, $3,
// ... It is one statement per k (a proof reads at most 2*64 nodes, and
// with the node cache warm a consistency proof none) with each pair a
// probe of its own, for the reasons given at runInLogSQL: arrays unnested
// or subscripted from a series made the server's work several times the
// index lookups', and a join against a VALUES list was planned, for a
// tenant the statistics did not know, as a scan of its nodes.
func sizeNodesSQL(schema string, k int) string {
	var b strings.Builder
	b.WriteString(`SELECT coalesce((SELECT size FROM {S}.logs WHERE tenant = $1), 0), NULL::integer, NULL::bigint, NULL::bytea`)
	for i := range k {
		fmt.Fprintf(&b, `
	UNION ALL
	SELECT NULL, n.level, n.idx, n.hash FROM {S}.log_nodes n WHERE n.tenant = $1 AND n.level = $%d::integer AND n.idx = $%d::bigint`, 2+2*i, 3+2*i)
	}
	return strings.ReplaceAll(b.String(), "{S}", pgx.Identifier{schema}.Sanitize())
}

// sizeNodesStatements keeps sizeNodesSQL by node count, built on first use.
type sizeNodesStatements struct {
	mu  sync.Mutex
	sql map[int]string
}

func (s *Store) sizeNodesStatement(k int) string {
	c := &s.sizeNodesSQL
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.sql[k]
	if !ok {
		if c.sql == nil {
			c.sql = map[int]string{}
		}
		q = sizeNodesSQL(s.schema, k)
		c.sql[k] = q
	}
	return q
}

// proofNodes is the node reader of the read paths for a tree of size
// leaves, committed: the cache in front of the pool.
// The first use starts filling the cache's levels in the background,
// unless the Store's warm is still reading what the fill reads.
func (s *Store) proofNodes(size uint64) log.NodeReader {
	return s.proofReader(size, nil)
}

// proofReader is proofNodes with ahead answered first among the cache's
// misses: nodes a proof's one statement read with the size.
func (s *Store) proofReader(size uint64, ahead []log.Node) log.NodeReader {
	if !s.warm.reading.Load() { // else the warm starts it (warm.go)
		s.nodeCache.FillInBackground(s.fills, log.RangeOf(s.LogNodes), size)
	}
	n := nodes{q: s.pool, tenant: s.tenant, sql: &s.q}
	var r log.NodeReader = n
	if ahead != nil {
		r = log.Ahead(ahead, counted{n, s})
	}
	return s.nodeCache.Reader(r, size)
}

// ProofRoundTrips is how many round trips to the database the Store's
// inclusion and consistency proofs have made since it was opened: one per
// proof once the node cache is warm.
func (s *Store) ProofRoundTrips() uint64 { return s.trips.Load() }

// counted is the store's node reader behind log.Ahead: a read that
// reaches it is one more round trip of a proof.
type counted struct {
	nodes
	s *Store
}

func (c counted) ReadNodes(ctx context.Context, ids []compact.NodeID) ([]log.Hash, error) {
	c.s.trips.Add(1)
	return c.nodes.ReadNodes(ctx, ids)
}

// scanNode reads a node row's level, index and hash (NULL: not valid).
func scanNode(level pgtype.Int4, idx pgtype.Int8, h []byte) (log.Node, error) {
	if !level.Valid || !idx.Valid || level.Int32 < 0 || level.Int32 > 63 || idx.Int64 < 0 {
		return log.Node{}, &store.CorruptError{Detail: "a log node row has no valid position"}
	}
	if len(h) != 32 {
		return log.Node{}, &store.CorruptError{Detail: fmt.Sprintf("log node (%d, %d) is %d bytes", level.Int32, idx.Int64, len(h))}
	}
	return log.Node{ID: compact.NewNodeID(uint(level.Int32), uint64(idx.Int64)), Hash: log.Hash(h)}, nil
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

// sizeAndNodes is, in one round trip, the log's size now and those of ids
// that are stored.
func (s *Store) sizeAndNodes(ctx context.Context, ids []compact.NodeID) (uint64, []log.Node, error) {
	if err := s.check(ctx); err != nil {
		return 0, nil, err
	}
	if len(ids) > 128 {
		return 0, nil, fmt.Errorf("read log size and nodes: %d nodes; a proof reads at most 128", len(ids))
	}
	args := make([]any, 1, 1+2*len(ids))
	args[0] = s.tenant
	for _, id := range ids {
		if id.Index <= math.MaxInt64 {
			args = append(args, int32(id.Level), int64(id.Index))
		}
	}
	s.trips.Add(1)
	rows, err := s.pool.Query(ctx, s.sizeNodesStatement(len(args)/2), args...)
	if err != nil {
		return 0, nil, fmt.Errorf("read log size and nodes: %w", err)
	}
	defer rows.Close()
	var size *int64
	ahead := make([]log.Node, 0, len(ids))
	var n, idx pgtype.Int8
	var level pgtype.Int4
	var h pgtype.DriverBytes
	for rows.Next() {
		if err := rows.Scan(&n, &level, &idx, &h); err != nil {
			return 0, nil, fmt.Errorf("read log size and nodes: %w", err)
		}
		if n.Valid {
			v := n.Int64
			size = &v
			continue
		}
		nd, err := scanNode(level, idx, h)
		if err != nil {
			return 0, nil, err
		}
		ahead = append(ahead, nd)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("read log size and nodes: %w", err)
	}
	if size == nil || *size < 0 {
		return 0, nil, &store.CorruptError{Detail: "no valid log size"}
	}
	return uint64(*size), ahead, nil
}

// runInLog reads the log's committed size, the run's position in it and
// the nodes below the cache's floor that an inclusion proof of it at size
// at (nil: the committed size) may need, in one round trip. Rows are
// scanned into values that need no reflection and no copy per row.
func (s *Store) runInLog(ctx context.Context, run store.RunID, at *uint64) (store.RunInLog, error) {
	var out store.RunInLog
	if err := s.check(ctx); err != nil {
		return out, err
	}
	var atSize *int64
	if at != nil && *at <= math.MaxInt64 {
		v := int64(*at)
		atSize = &v
	}
	s.trips.Add(1)
	q, args := s.runInLogStatement(), []any{s.tenant, run.String(), atSize}
	if q.floor == 0 {
		args = args[:2] // no border below the floor, so no $3
	}
	rows, err := s.pool.Query(ctx, q.sql, args...)
	if err != nil {
		return out, fmt.Errorf("read run %s: %w", run, err)
	}
	defer rows.Close()
	var head bool
	var size int64
	var index *int64
	var leaf []byte
	var rn, ridx, nidx pgtype.Int8
	var level pgtype.Int4
	var rl, h pgtype.DriverBytes
	for rows.Next() {
		if err := rows.Scan(&rn, &ridx, &rl, &level, &nidx, &h); err != nil {
			return out, fmt.Errorf("read run %s: %w", run, err)
		}
		if rn.Valid {
			head, size = true, rn.Int64
			if ridx.Valid {
				v := ridx.Int64
				index, leaf = &v, append([]byte(nil), rl...)
			}
			continue
		}
		nd, err := scanNode(level, nidx, h)
		if err != nil {
			return out, err
		}
		if out.Ahead == nil {
			out.Ahead = make([]log.Node, 0, 4)
		}
		out.Ahead = append(out.Ahead, nd)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("read run %s: %w", run, err)
	}
	if !head {
		return out, &store.CorruptError{Detail: "no valid log size"}
	}
	return out, out.SetRead(run, size, index, leaf)
}

// RoundTrip runs the Store's cheapest statement, the log's size read: one
// round trip to the server and no proof work, the ceiling a benchmark
// measures one-round-trip proofs beside.
func (s *Store) RoundTrip(ctx context.Context) error {
	_, err := s.committedSize(ctx)
	return err
}
