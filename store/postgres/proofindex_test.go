package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/storetest"
)

// planScan is one scan of a plan, as EXPLAIN (FORMAT JSON) names it.
type planScan struct {
	Type, Relation, Index string
	HeapFetches           float64
}

// inclusionScans runs s's inclusion statement for run under EXPLAIN
// (ANALYZE) and returns the scans of runs and log_nodes in its plan.
func inclusionScans(t *testing.T, s *Store, run store.RunID) []planScan {
	t.Helper()
	q := s.runInLogStatement()
	args := []any{s.tenant, run.String(), nil}
	if q.floor == 0 {
		args = args[:2]
	}
	return scans(t, s, q.sql, args...)
}

// scans runs query under EXPLAIN (ANALYZE) and returns the scans of runs
// and log_nodes in its plan.
func scans(t *testing.T, s *Store, query string, args ...any) []planScan {
	t.Helper()
	var out []byte
	if err := s.pool.QueryRow(context.Background(), `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+query, args...).Scan(&out); err != nil {
		t.Fatalf("explain %.60q: %v", query, err)
	}
	var plans []struct{ Plan json.RawMessage }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain output %.200s: %v", out, err)
	}
	var scans []planScan
	var walk func(raw json.RawMessage)
	walk = func(raw json.RawMessage) {
		var n struct {
			Type        string            `json:"Node Type"`
			Relation    string            `json:"Relation Name"`
			Index       string            `json:"Index Name"`
			HeapFetches float64           `json:"Heap Fetches"`
			Plans       []json.RawMessage `json:"Plans"`
		}
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatal(err)
		}
		if n.Relation == "runs" || n.Relation == "log_nodes" {
			scans = append(scans, planScan{n.Type, n.Relation, n.Index, n.HeapFetches})
		}
		for _, p := range n.Plans {
			walk(p)
		}
	}
	walk(plans[0].Plan)
	return scans
}

// checkIndexOnly requires the inclusion statement of a run of s's vacuumed
// log to read the run and its leaf node with one index-only scan each of
// the covering indexes, and no heap page: the two leaf pages a proof costs
// the server at 10^6 sealed runs, not four pages of tables that outgrow
// the default shared_buffers (proofindex.go).
func checkIndexOnly(t *testing.T, s *Store, run store.RunID) {
	t.Helper()
	scans := inclusionScans(t, s, run)
	want := map[string]bool{"runs_proof": false, "log_leaves": false}
	for _, sc := range scans {
		if _, ok := want[sc.Index]; !ok || sc.Type != "Index Only Scan" || sc.HeapFetches != 0 {
			t.Fatalf("inclusion statement scans %+v; want only index-only scans of runs_proof and log_leaves with no heap fetch (all: %+v)", sc, scans)
		}
		want[sc.Index] = true
	}
	for idx, seen := range want {
		if !seen {
			t.Fatalf("inclusion statement does not scan %s (scans: %+v)", idx, scans)
		}
	}
}

// TestInclusionProof_IndexOnlyScans: with the node cache holding every
// level, an inclusion proof's one statement reads the database through
// two index-only scans. It fails if the statement is rewritten so that
// the planner cannot use runs_proof (say, without its "log_index IS NOT
// NULL") or log_leaves (a level that is not the constant 0), or if the
// indexes stop covering what the statement reads.
func TestInclusionProof_IndexOnlyScans(t *testing.T) {
	s := openStore(t, Options{Schema: "runseal_p" + strings.ToLower(freshTenant()[1:12])})
	t.Cleanup(func() { sqlExec(t, `DROP SCHEMA IF EXISTS `+s.schema+` CASCADE`) })
	runs, tree := sealedLog(t, s, 3000) // VACUUM (FREEZE, ANALYZE) after
	if f := s.nodeCache.Floor(); f != 0 {
		t.Fatalf("node cache floor %d, want 0 (the test's premise)", f)
	}
	for _, i := range []int{0, 1499, 2999} {
		checkIndexOnly(t, s, runs[i])
	}
	// A level-0 tile (and the node cache's fill of level 0) reads the
	// same index, in order.
	q, args := s.logNodesQuery(0, 256, 512)
	if sc := scans(t, s, q, args...); len(sc) != 1 || sc[0].Type != "Index Only Scan" || sc[0].Index != "log_leaves" || sc[0].HeapFetches != 0 {
		t.Fatalf("level-0 tile read scans %+v; want one index-only scan of log_leaves", sc)
	}
	if err := s.WarmNodeCache(context.Background()); err != nil {
		t.Fatal(err)
	}
	storetest.CheckProofStatements(t, s, runs[:40], tree, 1, 1)

	// With the cache above level 0 (floor 2), the statement also reads the
	// leaf's sibling and the border's leaf from log_leaves, and the nodes
	// of level 1 through the primary key.
	const chunk = 256*32 + 256/8
	low := openStore(t, Options{Schema: s.schema, NodeCacheBytes: 8 * chunk})
	lowRuns, lowTree := sealedLog(t, low, 1003)
	if err := low.WarmNodeCache(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := low.nodeCache.Floor(); f != 2 {
		t.Fatalf("node cache floor %d, want 2 (the test's premise)", f)
	}
	sc := inclusionScans(t, low, lowRuns[700])
	leaves := 0
	for _, x := range sc {
		switch {
		case x.Type == "Index Only Scan" && (x.Index == "runs_proof" || x.Index == "log_leaves") && x.HeapFetches == 0:
			if x.Index == "log_leaves" {
				leaves++
			}
		case x.Type == "Index Scan" && x.Index == "log_nodes_pkey":
		default:
			t.Fatalf("floor 2: inclusion statement scans %+v (all: %+v)", x, sc)
		}
	}
	if leaves != 1 {
		t.Fatalf("floor 2: %d scans of log_leaves, want the one of level 0 (all: %+v)", leaves, sc)
	}
	storetest.CheckProofStatements(t, low, lowRuns, lowTree, 1, 1)
}

// TestMigrate_ProofIndexesOnExistingLog: a database written before the
// covering indexes (schema version 6, the log already sealed, one of the
// indexes built ahead by its operator) gains them when a Store opens it,
// and its proofs are then served from them and still verify with x/mod's
// tlog.
func TestMigrate_ProofIndexesOnExistingLog(t *testing.T) {
	ctx := context.Background()
	schema := "runseal_p" + strings.ToLower(freshTenant()[1:12])
	t.Cleanup(func() { sqlExec(t, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`) })
	old := openStore(t, Options{Schema: schema})
	runs, tree := sealedLog(t, old, 1003)
	old.Close()
	v := 0
	for i, m := range migrations {
		if m.sql == proofIndexesSchema {
			v = i + 1
		}
	}
	if v != SchemaVersion {
		t.Fatalf("the covering indexes are migration %d of %d; this test undoes the last one only", v, SchemaVersion)
	}
	sqlExec(t, `DROP INDEX `+schema+`.runs_proof, `+schema+`.log_leaves`)
	sqlExec(t, `DELETE FROM `+schema+`.migrations WHERE version = $1`, v)
	// An operator may build one beforehand without blocking writers; the
	// migration keeps it and builds the other.
	sqlExec(t, `CREATE INDEX CONCURRENTLY log_leaves ON `+schema+`.log_nodes(tenant, idx) INCLUDE (hash) WHERE level = 0`)

	s := openStore(t, Options{Schema: schema, Tenant: old.tenant})
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname IN ('runs_proof', 'log_leaves')`, schema).Scan(&n); err != nil || n != 2 {
		t.Fatalf("covering indexes after migration: %d (%v), want 2", n, err)
	}
	checkIndexOnly(t, s, runs[500])
	if err := s.WarmNodeCache(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckProofStatements(t, s, runs[:64], tree, 1, 1)
}
