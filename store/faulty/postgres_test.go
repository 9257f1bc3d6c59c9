package faulty_test

import (
	"context"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/faulty"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformancePostgresFaultsOff runs the suite through the decorator,
// with no fault scheduled, over PostgreSQL.
func TestConformancePostgresFaultsOff(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		return faulty.New(openPostgres(tb), faulty.Options{Seed: 1}), storetest.SleepClock{}
	}})
}

// openPostgres opens a fresh tenant of the package's test schema.
func openPostgres(tb testing.TB) store.Journal {
	s, err := postgres.New(context.Background(), pgtest.Pool(tb), postgres.Options{
		Tenant: "t" + strings.ToLower(ulid.Make().String()), Schema: "runseal_faulty_test"})
	if err != nil {
		tb.Fatalf("open postgres store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// TestFailurePoints_Postgres: each point a write can fail at, over
// PostgreSQL.
func TestFailurePoints_Postgres(t *testing.T) { testFailurePoints(t, openPostgres) }

// TestOptionalFailurePoints_Postgres: the optional interfaces' writes and
// reads fail on schedule, over PostgreSQL.
func TestOptionalFailurePoints_Postgres(t *testing.T) { testOptionalFailurePoints(t, openPostgres) }
