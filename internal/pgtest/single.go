package pgtest

import (
	"context"
	"os"
	"testing"
)

// Single returns a DSN for one test in a package without Main: the server
// named by $RUNSEAL_POSTGRES_DSN, or else one started for tb and stopped
// when it ends. Like DSN, it skips tb when RUNSEAL_SKIP_POSTGRES=1 and
// fails it when no server can be had.
func Single(tb testing.TB) string {
	tb.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	if os.Getenv(EnvSkip) == "1" {
		tb.Skipf("%s=1", EnvSkip)
	}
	srv, err := Start(context.Background())
	if err != nil {
		tb.Fatalf("no PostgreSQL for the test (set %s=1 to skip): %v", EnvSkip, err)
	}
	tb.Cleanup(srv.Stop)
	return srv.DSN
}
