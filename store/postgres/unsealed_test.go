package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/runseal/runseal/store"
)

// TestUnsealedByEdit_OldSchemaIsIndexedOnOpen: a schema at version 8,
// made before the log's leaves were indexed by hash, whose run was sealed
// and then unsealed by an edit while no store had it open, gets the index
// when this version opens it, and the run's Verify and an append to it
// are refused.
func TestUnsealedByEdit_OldSchemaIsIndexedOnOpen(t *testing.T) {
	ctx := context.Background()
	schema, qs := statsSchema(t, "unsealed")
	s, err := New(ctx, testPool(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{{Run: run, Kind: "Note", Fields: []byte(`{}`)},
		{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, run, 1, "succeeded"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Make the schema what version 8 wrote, then remove the run's seal.
	for _, q := range []string{
		`DROP INDEX ` + qs + `.log_leaf_hashes`,
		`DELETE FROM ` + qs + `.migrations WHERE version > 8`,
		`UPDATE ` + qs + `.runs SET sealed_outcome = NULL, sealed_at = NULL, log_index = NULL, leaf = NULL`,
	} {
		if _, err := testPool(t).Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err = New(ctx, testPool(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var indexed bool
	if err := testPool(t).QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = 'log_leaf_hashes')`, schema).Scan(&indexed); err != nil || !indexed {
		t.Fatalf("log_leaf_hashes after opening a version 8 schema: %v, %v", indexed, err)
	}
	var ce *store.CorruptError
	if _, err := s.Verify(ctx, run); !errors.As(err, &ce) {
		t.Fatalf("Verify of the unsealed run = %v, want a *store.CorruptError", err)
	}
	if _, err := s.Append(ctx, 1, []store.Append{{Run: run, Kind: "Note", Fields: []byte(`{}`)}}); !errors.As(err, &ce) || ce.Seq != 2 {
		t.Fatalf("Append to the unsealed run = %v, want a *store.CorruptError at its head, seq 2", err)
	}
}

// TestPlans_LeafLookupsSearchLeafHashes: the statements that look a run's
// head or records up among the log's leaves (a write's read of the run,
// the remembered runs' statement, Verify's) search log_leaf_hashes, in
// custom and generic plans, on a log the statistics know to be large,
// rather than read every leaf of the tenant.
func TestPlans_LeafLookupsSearchLeafHashes(t *testing.T) {
	ctx := context.Background()
	p := testPool(t)
	schema, qs := statsSchema(t, "leafplans")
	s, err := New(ctx, p, Options{Schema: schema, Tenant: "big"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fillTenant(t, qs, "big")
	if _, err := p.Exec(ctx, `INSERT INTO `+qs+`.log_nodes(tenant, level, idx, hash)
		SELECT 'big', 0, g, sha256(int8send(g)) FROM generate_series(0, 49999) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `ANALYZE `+qs+`.log_nodes`); err != nil {
		t.Fatal(err)
	}
	pc, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Release()
	conn := pc.Conn()
	stmts := []struct{ name, sql, args string }{
		{"runState", s.q.runState, `'00000000000000000000000001'`},
		{"runStates", s.q.runStates, `'{00000000000000000000000001,00000000000000000000000002}'::text[]`},
		{"runLeaves", s.q.runLeaves, `'00000000000000000000000001'`},
		{"appendKnown", s.q.appendKnown, appendKnownArgs},
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
		for i, st := range stmts {
			if _, err := conn.Exec(ctx, fmt.Sprintf(`PREPARE leafplan%d AS %s`, i, st.sql), pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			var doc []struct{ Plan planNode }
			q := fmt.Sprintf(`EXPLAIN (FORMAT JSON) EXECUTE leafplan%d('big', %s)`, i, st.args)
			if err := conn.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&doc); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if bad, n := doc[0].Plan.leafScans(); bad != "" || n == 0 {
				t.Errorf("%s, %s: %s (%d searches of log_leaf_hashes)\n%s", mode, st.name, bad, n, doc[0].Plan.String(""))
			}
			if _, err := conn.Exec(ctx, fmt.Sprintf(`DEALLOCATE leafplan%d`, i), pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// leafScans returns what is wrong with the first scan of log_nodes that
// is not a search of log_leaf_hashes, and how many such searches the plan
// has.
func (n planNode) leafScans() (string, int) {
	found := 0
	switch {
	case n.Index == "log_leaf_hashes":
		found++
	case n.Relation == "log_nodes" && n.NodeType != "Bitmap Heap Scan",
		n.Index != "" && strings.HasPrefix(n.Index, "log_"): // another index of log_nodes, under a bitmap scan
		return fmt.Sprintf("%s of log_nodes by %q (%s)", n.NodeType, n.Index, n.IndexCond), found
	}
	for _, c := range n.Plans {
		bad, k := c.leafScans()
		found += k
		if bad != "" {
			return bad, found
		}
	}
	return "", found
}
