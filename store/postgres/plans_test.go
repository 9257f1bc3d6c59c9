package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// TestPlans_FreshTenantUsesPrimaryKey: every statement that reaches run or
// lease rows by run id probes the primary key, in custom and in generic
// plans, on a schema never analyzed and on one whose statistics know a
// large tenant but not the one asked about. The plain forms (run = ANY($2),
// a join against unnest, tenant = $1 AND run = $2) scanned the whole tenant
// there, through runs_active or the primary key's tenant prefix: every
// append and seal of a tenant new since the last ANALYZE read all its runs.
func TestPlans_FreshTenantUsesPrimaryKey(t *testing.T) {
	ctx := context.Background()
	p := testPool(t)
	schema, qs := statsSchema(t, "plans")
	s, err := New(ctx, p, Options{Schema: schema, Tenant: "fresh"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pc, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Release()
	conn := pc.Conn()
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	stmts := []struct {
		name, sql, args string
		rels            []string // the relations whose scans must be primary key probes
	}{
		{"lockLeases", s.q.lockLeases, planRuns, []string{"leases"}},
		{"runStates", s.q.runStates, planRuns, []string{"runs"}},
		{"lockLease", s.q.lockLease, `'01AAAAAAAAAAAAAAAAAAAAAAAA'`, []string{"leases"}},
		{"runState", s.q.runState, `'01AAAAAAAAAAAAAAAAAAAAAAAA'`, []string{"runs"}},
		{"updateRun", s.q.updateRun, `'01AAAAAAAAAAAAAAAAAAAAAAAA', 2, '\x00'::bytea, NULL, NULL, NULL, NULL, NULL`, []string{"runs"}},
		{"updateRuns", s.q.updateRuns, planRuns + `, '{2,3}'::bigint[], ` + planHashes + `, ` + strings.Repeat(planNulls+`, `, 4) + planNulls, []string{"runs"}},
		{"appendKnown", s.q.appendKnown, appendKnownArgs, []string{"runs", "leases"}},
		{"sealRuns", s.q.sealRuns, planRuns + `, '{ok,ok}'::text[], '{1,2}'::bigint[], ` + planHashes, []string{"runs"}},
		{"head", s.q.head, `'01AAAAAAAAAAAAAAAAAAAAAAAA'`, []string{"runs"}},
		{"verifyRun", s.q.verifyRun, `'01AAAAAAAAAAAAAAAAAAAAAAAA'`, []string{"runs"}},
		{"requestCancel", s.q.requestCancel, `'01AAAAAAAAAAAAAAAAAAAAAAAA', 'a', 'b', 'c'`, []string{"runs"}},
		{"positions", s.q.positions, planRuns, []string{"runs"}},
		{"heads", s.q.heads, planRuns, []string{"runs"}},
		{"abandoned", s.q.abandoned, `10`, []string{"runs"}}, // its leases scan is the listing itself
	}
	check := func(phase, tenant string) {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			exec(`SET plan_cache_mode = ` + mode)
			for i, st := range stmts {
				exec(fmt.Sprintf(`PREPARE plan%d AS %s`, i, st.sql))
				var doc []struct{ Plan planNode }
				q := fmt.Sprintf(`EXPLAIN (FORMAT JSON) EXECUTE plan%d('%s', %s)`, i, tenant, st.args)
				if err := conn.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&doc); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if len(doc) != 1 {
					t.Fatalf("%s: %d plans", q, len(doc))
				}
				if bad, n := doc[0].Plan.offKey(st.rels); bad != "" || n == 0 {
					t.Errorf("%s, %s tenant %q, %s: %s (%d probes)\n%s", phase, mode, tenant, st.name, bad, n, doc[0].Plan.String(""))
				}
				exec(fmt.Sprintf(`DEALLOCATE plan%d`, i))
			}
		}
		exec(`RESET plan_cache_mode`)
	}
	check("never analyzed", "fresh")
	fillTenant(t, qs, "big")
	exec(`ANALYZE ` + qs + `.runs`)
	exec(`ANALYZE ` + qs + `.leases`)
	check("analyzed with another tenant", "fresh")
	check("analyzed", "big")
}

// Arguments for the EXPLAINs of statements over two runs (plans of
// prepared statements, so the values only need their types).
const (
	planRuns   = `'{01AAAAAAAAAAAAAAAAAAAAAAAA,01BBBBBBBBBBBBBBBBBBBBBBBB}'::text[]`
	planHashes = `ARRAY['\x00'::bytea, '\x00'::bytea]`
	planNulls  = `'{NULL,NULL}'::text[]`
	// appendKnownArgs are appendKnown's arguments after the tenant.
	appendKnownArgs = planRuns + `, '{2,3}'::bigint[], ` + planHashes + `, ` + planNulls + `, ` + planNulls + `, ` + planNulls + `, ` + planNulls + `, ` + planNulls + `, '{1,2}'::bigint[], ` + planHashes + `, '{1,1}'::bigint[], ` +
		planRuns + `, '{2,3}'::bigint[], '{a,b}'::text[], ` + planNulls + `, ` + planHashes + `, ` + planHashes + `, ` + planHashes + `, ` + planHashes
)

// statsSchema creates a schema of the journal's tables for tb, named
// prefix and a fresh suffix, and drops it after tb: autovacuum leaves its
// runs and leases alone, so their statistics are what tb gathers.
func statsSchema(tb testing.TB, prefix string) (schema, quoted string) {
	tb.Helper()
	ctx := context.Background()
	p := testPool(tb)
	schema = prefix + "_" + strings.ToLower(ulid.Make().String())
	quoted = pgx.Identifier{schema}.Sanitize()
	s, err := New(ctx, p, Options{Schema: schema})
	if err != nil {
		tb.Fatal(err)
	}
	s.Close()
	tb.Cleanup(func() {
		if _, err := p.Exec(context.Background(), `DROP SCHEMA `+quoted+` CASCADE`); err != nil {
			tb.Errorf("drop schema: %v", err)
		}
	})
	for _, t := range []string{"runs", "leases"} {
		if _, err := p.Exec(ctx, `ALTER TABLE `+quoted+`.`+t+` SET (autovacuum_enabled = false)`); err != nil {
			tb.Fatal(err)
		}
	}
	return schema, quoted
}

// fillTenant writes 20,000 run and lease rows of tenant into the schema
// quoted, directly: a tenant as large as a busy one, made in a second.
func fillTenant(tb testing.TB, quoted, tenant string) {
	tb.Helper()
	for _, q := range []string{
		`INSERT INTO ` + quoted + `.runs(tenant, run, head_seq, head_hash, active_at)
			SELECT $1, lpad(g::text, 26, '0'), 1, '\x00', g FROM generate_series(1, 20000) g`,
		`INSERT INTO ` + quoted + `.leases(tenant, run, owner, epoch, expires_at, released)
			SELECT $1, lpad(g::text, 26, '0'), '', 0, 'epoch', true FROM generate_series(1, 20000) g`,
	} {
		if _, err := testPool(tb).Exec(context.Background(), q, tenant); err != nil {
			tb.Fatal(err)
		}
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}

// offKey returns what is wrong with the first scan of one of rels that is
// not a probe of its primary key by (tenant, run) or a TID scan, and how
// many such probes the plan has.
func (n planNode) offKey(rels []string) (string, int) {
	probes := 0
	if n.Relation != "" && n.NodeType != "ModifyTable" && n.NodeType != "LockRows" {
		for _, r := range rels {
			if n.Relation != r {
				continue
			}
			switch {
			case n.NodeType == "Tid Scan":
			case (n.NodeType == "Index Scan" || n.NodeType == "Index Only Scan") && n.Index == r+"_pkey" && strings.Contains(n.IndexCond, "(run "):
			default:
				return fmt.Sprintf("%s of %s by %q (%s)", n.NodeType, r, n.Index, n.IndexCond), probes
			}
			probes++
		}
	}
	for _, c := range n.Plans {
		bad, k := c.offKey(rels)
		probes += k
		if bad != "" {
			return bad, probes
		}
	}
	return "", probes
}

func (n planNode) String(indent string) string {
	s := fmt.Sprintf("%s%s %s %s %s\n", indent, n.NodeType, n.Relation, n.Index, n.IndexCond)
	for _, c := range n.Plans {
		s += c.String(indent + "  ")
	}
	return s
}
