package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
)

// warmRuns is the size of the warm tests' logs: enough that each proof
// index spans many leaf pages (about 75 entries a page).
const warmRuns = 3000

// warmSchema is a schema of its own for one warm test, dropped after it,
// so that the server's page counts of its tables are this test's alone.
func warmSchema(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	schema := "runseal_warm_" + strings.ToLower(ulid.Make().String())
	t.Cleanup(func() {
		pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	return schema
}

// pagesTouched is how many table and index pages of the proof tables the
// server has counted (hits and reads) for s's schema.
func pagesTouched(t *testing.T, s *Store) uint64 {
	t.Helper()
	hits, reads, err := s.ServerBuffers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return hits + reads
}

// proofIndexTouched is how many pages of index the server has counted
// touched (hits and reads) in s's schema since it was built (its build
// included), and how many it has.
func proofIndexTouched(t *testing.T, s *Store, index string) (touched, pages int64) {
	t.Helper()
	pagesTouched(t, s) // makes the pool's sessions publish their counts
	err := s.pool.QueryRow(context.Background(), `SELECT coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0),
		pg_relation_size(indexrelid) / current_setting('block_size')::int
		FROM pg_statio_all_indexes WHERE schemaname = $1 AND indexrelname = $2`, s.schema, index).Scan(&touched, &pages)
	if err != nil {
		t.Fatal(err)
	}
	return touched, pages
}

// openWarmed opens a store on tenant of schema over pool, waits for its
// warm and returns it with its report and the pages the warm touched.
func openWarmed(t *testing.T, pool *pgxpool.Pool, schema, tenant string, opts Options) (*Store, WarmReport, uint64) {
	t.Helper()
	ctx := context.Background()
	opts.Schema, opts.Tenant = schema, tenant
	probe, err := New(ctx, pool, Options{Schema: schema, Tenant: tenant, NoWarm: true})
	if err != nil {
		t.Fatal(err)
	}
	before := pagesTouched(t, probe)
	probe.Close()
	s, err := New(ctx, pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rep, err := s.WaitWarm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, rep, pagesTouched(t, s) - before
}

// buildLog writes a log of n sealed runs to tenant of schema, with the
// warm of the store that writes it off.
func buildLog(t *testing.T, pool *pgxpool.Pool, schema, tenant string, n int) *Store {
	t.Helper()
	s, err := New(context.Background(), pool, Options{Schema: schema, Tenant: tenant, NoWarm: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	l, err := s.CreateSealedLog(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != n {
		t.Fatalf("built %d runs, want %d", len(l.Runs), n)
	}
	return s
}

// TestWarm_ColdStartReadsProofPages: a store opened on a log with no
// pg_prewarm in the database reads every page of its tenant's part of
// both proof indexes (index-only scans) and fills the node cache, in the
// background, and says why it did not use pg_prewarm; its proofs then
// cost one round trip each.
func TestWarm_ColdStartReadsProofPages(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	var ext bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm')`).Scan(&ext); err != nil {
		t.Fatal(err)
	}
	if ext {
		t.Fatal("pg_prewarm is installed in the test database; this test is of the store without it")
	}
	schema := warmSchema(t, pool)
	tenant := freshTenant()
	before, _ := proofIndexTouched(t, buildLog(t, pool, schema, tenant, warmRuns), "runs_proof")
	s, rep, touched := openWarmed(t, pool, schema, tenant, Options{})
	if rep.Err != nil {
		t.Fatalf("warm stopped short: %v", rep.Err)
	}
	if rep.Method != "index scans" || rep.Fallback == nil || !strings.Contains(rep.Fallback.Error(), "CREATE EXTENSION pg_prewarm") {
		t.Fatalf("warm %+v, want index scans because pg_prewarm is not installed", rep)
	}
	// Each index holds about 75 entries a page; the scans read every leaf
	// page of both, the node cache's fill the leaves again and the upper
	// nodes' pages.
	if min := uint64(2 * warmRuns / 100); touched < min {
		t.Fatalf("the warm touched %d pages of the proof tables, want at least %d", touched, min)
	}
	// runs_proof, which the node cache's fill does not read: its leaf
	// pages, all of them this tenant's.
	if after, pages := proofIndexTouched(t, s, "runs_proof"); after-before < pages/2 || pages < 10 {
		t.Fatalf("the warm touched %d pages of runs_proof's %d", after-before, pages)
	}
	if !rep.NodeCache {
		t.Fatal("node cache not filled")
	}
	st := s.NodeCacheStats()
	if st.Floor != 0 || st.Bytes == 0 {
		t.Fatalf("node cache %+v after the warm, want every level of %d leaves", st, warmRuns)
	}
	trips := s.ProofRoundTrips()
	if _, err := s.ConsistencyProof(ctx, warmRuns/3, warmRuns); err != nil {
		t.Fatal(err)
	}
	if d := s.ProofRoundTrips() - trips; d != 1 {
		t.Fatalf("a consistency proof after the warm cost %d round trips, want 1", d)
	}
}

// TestWarm_OffReadsNothing: with NoWarm a store opened on a log touches
// no page of the proof tables and leaves the node cache empty until a
// proof.
func TestWarm_OffReadsNothing(t *testing.T) {
	pool := testPool(t)
	schema := warmSchema(t, pool)
	tenant := freshTenant()
	buildLog(t, pool, schema, tenant, warmRuns)
	s, rep, touched := openWarmed(t, pool, schema, tenant, Options{NoWarm: true})
	if rep != (WarmReport{}) {
		t.Fatalf("warm off reported %+v", rep)
	}
	if touched != 0 {
		t.Fatalf("warm off touched %d pages of the proof tables", touched)
	}
	if st := s.NodeCacheStats(); st.Bytes != 0 {
		t.Fatalf("warm off filled the node cache: %+v", st)
	}
}

// TestWarm_EmptyLogReadsNothing: a store opened on an empty log has
// nothing to warm, and its first proofs fill the cache as they would.
func TestWarm_EmptyLogReadsNothing(t *testing.T) {
	s := openStore(t, Options{})
	rep, err := s.WaitWarm(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Method != "" || rep.NodeCache || rep.Err != nil {
		t.Fatalf("warm of an empty log: %+v", rep)
	}
}

// warmDatabase is a database of its own on the test server, for a test
// that installs an extension or makes a role, and a role of its own that
// may create schemas in it: the configuration of a pool on it (as the test
// server's user), the role's name, and a cleanup that drops both. A server
// that refuses (its user is not a superuser) skips the test.
func warmDatabase(t *testing.T) (*pgxpool.Config, string) {
	t.Helper()
	ctx := context.Background()
	pool := testPool(t)
	id := strings.ToLower(ulid.Make().String())
	db, role := "runseal_warm_"+id, "runseal_warm_"+id
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			t.Skipf("the test server's user may not create a database: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "GRANT CREATE ON DATABASE " + db + " TO " + role} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Database = db
	return cfg, role
}

// poolAs is a pool of cfg as user (cfg's own when empty).
func poolAs(t *testing.T, cfg *pgxpool.Config, user string) *pgxpool.Pool {
	t.Helper()
	cfg = cfg.Copy()
	if user != "" {
		cfg.ConnConfig.User = user
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestWarm_PgPrewarm: with the extension installed, the warm reads both
// proof indexes whole with pg_prewarm (into shared_buffers, where they fit
// in half of them, as a small log's do) and the log's nodes for the fill.
// A user who may not run pg_prewarm gets the index scans instead, told
// why, and the warm and the proofs still succeed.
func TestWarm_PgPrewarm(t *testing.T) {
	ctx := context.Background()
	cfg, role := warmDatabase(t)
	admin := poolAs(t, cfg, "")
	if _, err := admin.Exec(ctx, "CREATE EXTENSION pg_prewarm"); err != nil {
		t.Fatalf("the test server has no pg_prewarm (PostgreSQL's contrib): %v", err)
	}
	schema := warmSchema(t, admin)
	tenant := freshTenant()
	buildLog(t, admin, schema, tenant, warmRuns)
	s, rep, touched := openWarmed(t, admin, schema, tenant, Options{})
	if rep.Err != nil || rep.Method != "pg_prewarm" || rep.Fallback != nil || !rep.NodeCache {
		t.Fatalf("warm %+v, want pg_prewarm and the node cache", rep)
	}
	var idxPages int64
	if err := admin.QueryRow(ctx, `SELECT sum(pg_relation_size(format('%I.%I', $1::text, i)::regclass)) / current_setting('block_size')::int
		FROM unnest(ARRAY['runs_proof', 'log_leaves']) i`, schema).Scan(&idxPages); err != nil {
		t.Fatal(err)
	}
	if rep.Buffered != idxPages || rep.Pages <= idxPages {
		t.Fatalf("pg_prewarm read %d pages, %d into shared_buffers; want both proof indexes' %d into the buffers and the log's nodes beside", rep.Pages, rep.Buffered, idxPages)
	}
	if touched < uint64(idxPages) {
		t.Fatalf("the server counted %d pages touched, fewer than the indexes' %d", touched, idxPages)
	}
	if _, err := s.InclusionProof(ctx, runID(t, s, 7)); err != nil {
		t.Fatal(err)
	}

	// A role that owns its tables but may not run pg_prewarm.
	if _, err := admin.Exec(ctx, "REVOKE EXECUTE ON FUNCTION pg_prewarm(regclass, text, text, bigint, bigint) FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	user := poolAs(t, cfg, role)
	uschema := "runseal_warm_" + strings.ToLower(ulid.Make().String())
	buildLog(t, user, uschema, tenant, 100)
	u, urep, _ := openWarmed(t, user, uschema, tenant, Options{})
	if urep.Err != nil || urep.Method != "index scans" || !urep.NodeCache {
		t.Fatalf("warm without the right to run pg_prewarm: %+v, want index scans and the node cache", urep)
	}
	var pe *pgconn.PgError
	if !errors.As(urep.Fallback, &pe) || pe.Code != "42501" {
		t.Fatalf("fallback reason %v, want the server's permission denied", urep.Fallback)
	}
	if _, err := u.InclusionProof(ctx, runID(t, u, 3)); err != nil {
		t.Fatal(err)
	}
}

// runID is the run at log index i of s's log.
func runID(t *testing.T, s *Store, i int) store.RunID {
	t.Helper()
	var text string
	err := s.pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT run FROM %s.runs WHERE tenant = $1 AND log_index = $2`, pgx.Identifier{s.schema}.Sanitize()), s.tenant, i).Scan(&text)
	if err != nil {
		t.Fatal(err)
	}
	id, err := store.ParseRunID(text)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestWarm_CloseStopsIt: Close cancels a warm under way rather than waiting
// it out. The warm is held where it reads log_nodes (pg_prewarm of its
// visibility map, or the fill's scan), by another transaction's exclusive
// lock on the table; Close must return while that lock is still held, the
// warm report its cancellation, and the node cache stay unfilled.
func TestWarm_CloseStopsIt(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	schema := warmSchema(t, pool)
	tenant := freshTenant()
	buildLog(t, pool, schema, tenant, warmRuns)
	locker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback(ctx)
	nodes := pgx.Identifier{schema, "log_nodes"}.Sanitize()
	if _, err := locker.Exec(ctx, `LOCK TABLE `+nodes+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, pool, Options{Schema: schema, Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { // the warm waits for the lock
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`, nodes).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		locker.Rollback(ctx)
		t.Fatal("Close waited for the warm instead of stopping it")
	}
	rep, err := s.WaitWarm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rep.Err, ErrWarm) || !errors.Is(rep.Err, context.Canceled) {
		t.Fatalf("warm stopped by Close reports %v, want ErrWarm and context.Canceled", rep.Err)
	}
	if rep.NodeCache {
		t.Fatal("a warm stopped by Close says it filled the node cache")
	}
	if _, err := s.ConsistencyProof(ctx, 1, 2); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("proof after Close: %v, want store.ErrClosed", err)
	}
}
