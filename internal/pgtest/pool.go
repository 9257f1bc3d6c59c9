package pgtest

import (
	"context"
	"flag"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error
)

// Pool returns one connection pool to the tests' server, shared by the
// test binary's tests (each should use a fresh tenant of its own).
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	dsn := DSN(tb)
	poolOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			poolErr = err
			return
		}
		cfg.MaxConns = 20
		pool, poolErr = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if poolErr != nil {
		tb.Fatalf("pgtest: pool: %v", poolErr)
	}
	return pool
}

// MainUnlessFuzzing is Main, except that a fuzzing run (and each of its
// workers, which re-run TestMain) gets no server: fuzz targets need none.
func MainUnlessFuzzing(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	Main(m)
}
