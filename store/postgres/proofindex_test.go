package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/log"
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
	// of level 1 through the primary key, each a probe of its own.
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
	leaves, upper := 0, 0
	for _, x := range sc {
		switch {
		case x.Type == "Index Only Scan" && x.Index == "runs_proof" && x.HeapFetches == 0:
		case x.Type == "Index Only Scan" && x.Index == "log_leaves" && x.HeapFetches == 0:
			leaves++
		case x.Type == "Index Scan" && x.Index == "log_nodes_pkey":
			upper++
		default:
			t.Fatalf("floor 2: inclusion statement scans %+v (all: %+v)", x, sc)
		}
	}
	// Level 0: the leaf, its sibling, the border's leaf; level 1: the
	// sibling and the border's node.
	if leaves != 3 || upper != 2 {
		t.Fatalf("floor 2: %d probes of log_leaves and %d of the primary key, want 3 and 2 (all: %+v)", leaves, upper, sc)
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
	schema, old, runs, tree := closedLog(t, 1003)
	v := 0
	for i, m := range migrations {
		if m.sql == proofIndexesSchema {
			v = i + 1
		}
	}
	if v == 0 || v >= SchemaVersion || migrations[v].sql != denseProofIndexesSchema {
		t.Fatalf("the covering indexes are migration %d of %d, not followed by their packing", v, SchemaVersion)
	}
	sqlExec(t, `DROP INDEX `+schema+`.runs_proof, `+schema+`.log_leaves`)
	sqlExec(t, `DELETE FROM `+schema+`.migrations WHERE version >= $1`, v)
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

// TestPlans_InclusionProbesByRun: the inclusion statement probes runs by
// (tenant, run) and log_nodes by (tenant, idx), and so does the
// consistency proof's, in custom and in generic plans, for a tenant the
// statistics do not know beside a large one they do, and for the large
// one: a scan of the tenant's prefix would read every node of it, on every
// proof.
func TestPlans_InclusionProbesByRun(t *testing.T) {
	ctx := context.Background()
	p := testPool(t)
	schema, qs := statsSchema(t, "proofplans")
	if _, err := p.Exec(ctx, `ALTER TABLE `+qs+`.log_nodes SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	big := openStore(t, Options{Schema: schema, Tenant: "big"})
	sealedLog(t, big, 20000) // VACUUM (FREEZE, ANALYZE) after
	pc, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Release()
	conn := pc.Conn()
	for _, st := range []struct{ sql, args string }{
		{runInLogSQL(schema, 0), `'%s', '01AAAAAAAAAAAAAAAAAAAAAAAA'`},
		{runInLogSQL(schema, 2), `'%s', '01AAAAAAAAAAAAAAAAAAAAAAAA', NULL`},
		{sizeNodesSQL(schema, 3), `'%s', 0, 4, 1, 7, 3, 0`}, // a consistency proof's nodes
	} {
		sql, args := st.sql, st.args
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			for _, tenant := range []string{"fresh", "big"} {
				for _, q := range []string{`SET plan_cache_mode = ` + mode, `PREPARE incl AS ` + sql} {
					if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				var doc []struct{ Plan planNode }
				q := `EXPLAIN (FORMAT JSON) EXECUTE incl(` + fmt.Sprintf(args, tenant) + `)`
				if err := conn.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&doc); err != nil || len(doc) != 1 {
					t.Fatalf("%s: %v", q, err)
				}
				if bad := doc[0].Plan.offProbe(); bad != "" {
					t.Errorf("%.40q, %s, tenant %q: %s\n%s", sql, mode, tenant, bad, doc[0].Plan.String(""))
				}
				if _, err := conn.Exec(ctx, `DEALLOCATE incl`, pgx.QueryExecModeSimpleProtocol); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if _, err := conn.Exec(ctx, `RESET plan_cache_mode`, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
}

// offProbe returns what is wrong with the first scan of runs or log_nodes
// that is not an index probe by run or by node index.
func (n planNode) offProbe() string {
	switch n.Relation {
	case "runs":
		if !strings.HasPrefix(n.NodeType, "Index") || (n.Index != "runs_proof" && n.Index != "runs_pkey") || !strings.Contains(n.IndexCond, "(run ") {
			return fmt.Sprintf("%s of runs by %q (%s)", n.NodeType, n.Index, n.IndexCond)
		}
	case "log_nodes":
		if !strings.HasPrefix(n.NodeType, "Index") || (n.Index != "log_leaves" && n.Index != "log_nodes_pkey") || !strings.Contains(n.IndexCond, "(idx ") {
			return fmt.Sprintf("%s of log_nodes by %q (%s)", n.NodeType, n.Index, n.IndexCond)
		}
	}
	for _, c := range n.Plans {
		if bad := c.offProbe(); bad != "" {
			return bad
		}
	}
	return ""
}

// TestMigrate_DenseProofIndexesOnExistingLog: a database whose covering
// indexes were built loose (schema version 7, the log already sealed;
// runs_proof at the default fillfactor, log_leaves at 70) has both packed
// when a Store opens it, rebuilt smaller, and its proofs are still
// served from them by index-only scans and still verify with x/mod's tlog;
// an altered leaf node still fails its proof (the conformance suite holds
// every store to that, on the packed indexes).
func TestMigrate_DenseProofIndexesOnExistingLog(t *testing.T) {
	ctx := context.Background()
	schema, old, runs, tree := closedLog(t, 3001)
	// The database as it was before the packing; migrations after it (none
	// yet) run again, as each is written to.
	p := slices.IndexFunc(migrations, func(m migration) bool { return m.sql == denseProofIndexesSchema }) + 1
	if p == 0 {
		t.Fatal("no migration packs the proof indexes")
	}
	sqlExec(t, `ALTER INDEX `+schema+`.runs_proof RESET (fillfactor)`)
	sqlExec(t, `REINDEX INDEX `+schema+`.runs_proof`)
	sqlExec(t, `ALTER INDEX `+schema+`.log_leaves SET (fillfactor = 70)`)
	sqlExec(t, `REINDEX INDEX `+schema+`.log_leaves`)
	sqlExec(t, `DELETE FROM `+schema+`.migrations WHERE version >= $1`, p)
	size := func(index string) (pages int64, opts []string) {
		t.Helper()
		if err := testPool(t).QueryRow(ctx, `SELECT pg_relation_size(c.oid) / 8192, coalesce(c.reloptions, '{}') FROM pg_class c WHERE c.oid = $1::regclass`,
			schema+"."+index).Scan(&pages, &opts); err != nil {
			t.Fatal(err)
		}
		return pages, opts
	}
	runsBefore, _ := size("runs_proof")
	leavesBefore, _ := size("log_leaves")

	s := openStore(t, Options{Schema: schema, Tenant: old.tenant})
	for _, ix := range []struct {
		name   string
		before int64
	}{{"runs_proof", runsBefore}, {"log_leaves", leavesBefore}} {
		pages, opts := size(ix.name)
		if !slices.Contains(opts, "fillfactor=100") || pages >= ix.before {
			t.Errorf("%s after migration: %d pages (%d before), options %v; want fillfactor=100 and fewer pages", ix.name, pages, ix.before, opts)
		}
	}
	checkIndexOnly(t, s, runs[1500])
	if err := s.WarmNodeCache(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckProofStatements(t, s, runs[:64], tree, 1, 1)

	// Opening it again finds both packed, as an operator who packed them
	// ahead leaves them, and rebuilds nothing.
	var oid1 uint32
	if err := testPool(t).QueryRow(ctx, `SELECT relfilenode FROM pg_class WHERE oid = $1::regclass`, schema+".runs_proof").Scan(&oid1); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, `DELETE FROM `+schema+`.migrations WHERE version >= $1`, p)
	openStore(t, Options{Schema: schema, Tenant: old.tenant})
	var oid2 uint32
	if err := testPool(t).QueryRow(ctx, `SELECT relfilenode FROM pg_class WHERE oid = $1::regclass`, schema+".runs_proof").Scan(&oid2); err != nil {
		t.Fatal(err)
	}
	if oid1 != oid2 {
		t.Errorf("a packed runs_proof was rebuilt by the migration (file %d, then %d)", oid1, oid2)
	}
}

// closedLog writes a log of n sealed runs into a tenant of a schema of its
// own, dropped after the test, and closes the store: a database a later
// version of the code then opens.
func closedLog(t *testing.T, n int) (schema string, old *Store, runs []store.RunID, tree log.NodeReader) {
	t.Helper()
	schema = "runseal_p" + strings.ToLower(freshTenant()[1:12])
	t.Cleanup(func() { sqlExec(t, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`) })
	old = openStore(t, Options{Schema: schema})
	runs, tree = sealedLog(t, old, n)
	old.Close()
	return schema, old, runs, tree
}
