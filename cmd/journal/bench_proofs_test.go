package main

import (
	"encoding/json"
	"testing"

	"github.com/runseal/runseal/internal/pgtest"
)

// TestBenchProofs: "journal bench --proofs N --proofs-postgres DSN" measures
// proofs on both stores from the same log, each proof checked against the
// checkpoint, with the round-trip ceiling beside them, and reports them in
// one JSON document; --proofs-postgres alone is a usage error.
func TestBenchProofs(t *testing.T) {
	expect(t, cli(t, "", "", "bench", "--proofs-postgres", "postgres://localhost/x"), exitUsage, "--proofs-postgres needs --proofs")
	expect(t, cli(t, "", "", "bench", "--proofs", "10", "--proofs-served", "-1"), exitUsage, "--proofs-served must not be negative")
	expect(t, cli(t, "", "", "bench", "--proofs", "10", "--proofs-sqlite=false"), exitUsage, "--proofs-sqlite=false needs --proofs-postgres")
	expect(t, cli(t, "", "", "bench", "--proofs", "10", "--proofs-postgres", "postgres://localhost/x", "--proofs-pg-restart", "true"), exitUsage, "--proofs-pg-restart needs --proofs-cold")
	expect(t, cli(t, "", "", "bench", "--proofs-cold"), exitUsage, "--proofs-cold needs --proofs")
	dsn := pgtest.Single(t)
	// A schema of the test's own: without --keep the bench drops its
	// schema, and $RUNSEAL_POSTGRES_DSN may name a server whose
	// runseal_bench_proofs holds a kept 10^6 log.
	t.Setenv("RUNSEAL_BENCH_PROOFS_SCHEMA", "runseal_test_bench_proofs")
	r := cli(t, "", "", "bench", "--json", "--throughput=false", "--dir", t.TempDir(), "--proofs", "300", "--proof-samples", "200", "--proofs-served", "100", "--proofs-postgres", dsn)
	expect(t, r, exitOK)
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json is not one JSON document: %v\n%s", err, r.stdout)
	}
	if rep.Proofs == nil || rep.Proofs.Postgres == nil {
		t.Fatalf("no proofs on both stores: %s", r.stdout)
	}
	for name, p := range map[string]*proofsReport{"sqlite": rep.Proofs, "postgres": rep.Proofs.Postgres} {
		if p.Size != 300 || p.Inclusion.Proofs != 200 || p.Consistency.Proofs != 200 {
			t.Errorf("%s: size %d, %d and %d proofs", name, p.Size, p.Inclusion.Proofs, p.Consistency.Proofs)
		}
		if p.Inclusion.P50us <= 0 || p.Inclusion.NodeReads <= 0 || p.Inclusion.RoundTrips < 1 {
			t.Errorf("%s inclusion: %+v", name, p.Inclusion)
		}
		if p.RoundTrip.Proofs != 400 || p.RoundTrip.P50us <= 0 {
			t.Errorf("%s ceiling: %+v", name, p.RoundTrip)
		}
		if p.Served != 100 {
			t.Errorf("%s: %d proofs served before the second pass, want 100", name, p.Served)
		}
		if tl := p.Inclusion.Tail; tl == nil || tl.Slowest.Proofs != 2 || tl.All.Proofs != 200 || tl.Slowest.WallUs < tl.All.WallUs {
			t.Errorf("%s inclusion tail: %+v", name, tl)
		}
	}
	// Only PostgreSQL's pool is traced: its tail says how long the
	// statements took; SQLite's cannot.
	if tl := rep.Proofs.Postgres.Inclusion.Tail; tl == nil || tl.All.StatementUs <= 0 || tl.All.StatementUs > tl.All.WallUs {
		t.Errorf("postgres inclusion tail: %+v", tl)
	}
	if tl := rep.Proofs.Inclusion.Tail; tl == nil || tl.All.StatementUs != -1 {
		t.Errorf("sqlite inclusion tail: %+v", tl)
	}
	// The server's page counts: PostgreSQL's proofs touch index pages (at
	// least one of each covering index per inclusion), SQLite has no server.
	if in := rep.Proofs.Postgres.Inclusion; in.ServerPages < 2 || in.ServerReads < 0 || in.ServerReads > in.ServerPages {
		t.Errorf("postgres inclusion: %.2f server pages, %.2f not buffered", in.ServerPages, in.ServerReads)
	}
	if in := rep.Proofs.Inclusion; in.ServerPages != -1 || in.ServerReads != -1 {
		t.Errorf("sqlite inclusion: server pages %.2f, %.2f; want -1 (not counted)", in.ServerPages, in.ServerReads)
	}
}
