package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/storetest"
)

func TestMain(m *testing.M) {
	// The active-active test re-runs this binary as its worker processes.
	if os.Getenv(workerEnv) != "" {
		os.Exit(activeActiveWorker())
	}
	pgtest.Main(m)
}

var (
	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error
)

// testPool is one pool for the package's tests; handles share it, each
// with its own tenant, as the processes of a real deployment would.
func testPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	dsn := pgtest.DSN(tb)
	poolOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			poolErr = err
			return
		}
		cfg.MaxConns = 40
		pool, poolErr = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if poolErr != nil {
		tb.Fatalf("pool: %v", poolErr)
	}
	return pool
}

func freshTenant() string { return "t" + strings.ToLower(ulid.Make().String()) }

// openStore opens a handle on a fresh tenant of the shared test schema.
func openStore(tb testing.TB, opts Options) *Store {
	tb.Helper()
	if opts.Tenant == "" {
		opts.Tenant = freshTenant()
	}
	if opts.Schema == "" {
		opts.Schema = "runseal_test"
	}
	s, err := New(context.Background(), testPool(tb), opts)
	if err != nil {
		tb.Fatalf("open postgres store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func harness() storetest.Harness {
	return storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		return openStore(tb, Options{}), storetest.SleepClock{}
	}, Tamper: tamper}
}

// tamper runs one statement against j's schema on a connection of its own,
// as anyone with write access to the server can: ? placeholders become $n.
func tamper(tb testing.TB, j store.Journal, query string, args ...any) {
	tb.Helper()
	s, ok := j.(*Store)
	if !ok {
		tb.Fatalf("tamper: %T is not a *postgres.Store", j)
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{s.Schema()}.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	if _, err := tx.Exec(ctx, b.String(), args...); err != nil {
		tb.Fatalf("tamper %q: %v", query, err)
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness())
}

// TestConformanceOneWritePerTransaction runs the suite again with group
// commit off, so both extremes of group size are held to the contract.
func TestConformanceOneWritePerTransaction(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		return openStore(tb, Options{MaxGroup: 1, Committers: 1}), storetest.SleepClock{}
	}})
}
