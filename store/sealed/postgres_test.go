package sealed_test

import (
	"context"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.MainUnlessFuzzing(m) }

// openPostgres opens a handle on a fresh tenant of a shared test schema.
func openPostgres(tb testing.TB) *postgres.Store {
	tb.Helper()
	s, err := postgres.New(context.Background(), pgtest.Pool(tb), postgres.Options{
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
	}})
}

func TestSealingPostgres(t *testing.T) {
	storetest.RunSealing(t, sealingHarness(func(tb testing.TB) store.Journal { return openPostgres(tb) }))
}
