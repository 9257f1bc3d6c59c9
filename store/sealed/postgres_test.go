package sealed_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error
)

// openPostgres opens a handle on a fresh tenant of a shared test schema.
func openPostgres(tb testing.TB) *postgres.Store {
	tb.Helper()
	dsn := pgtest.DSN(tb)
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
		tb.Fatalf("pool: %v", poolErr)
	}
	s, err := postgres.New(context.Background(), pool, postgres.Options{
		Tenant: "t" + strings.ToLower(ulid.Make().String()), Schema: "runseal_sealed_test"})
	if err != nil {
		tb.Fatalf("open postgres store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// TestConformancePostgres runs the whole store suite through the sealing
// decorator over PostgreSQL.
func TestConformancePostgres(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		return sealed.New(openPostgres(tb), openRing(tb), sealed.Options{}), storetest.SleepClock{}
	}, Skip: sealedSkips})
}

func TestSealingPostgres(t *testing.T) {
	storetest.RunSealing(t, sealingHarness(func(tb testing.TB) store.Journal { return openPostgres(tb) }))
}
