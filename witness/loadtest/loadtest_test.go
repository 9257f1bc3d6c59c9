package loadtest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestRun runs a short load test against the in-process witness: every
// request of a healthy run is answered 200 with a cosignature that
// verifies, and the report carries the ceilings.
func TestRun(t *testing.T) {
	rep, err := Run(context.Background(), Config{
		Logs: 4, StartQPS: 40, Factor: 1.5, MaxQPS: 70, Step: 400 * time.Millisecond,
		MaxP99: 10 * time.Second, Ceiling: 50 * time.Millisecond, Dir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	t.Logf("%s", b)
	if len(rep.Steps) != 2 || rep.Requests == 0 || len(rep.ErrorsByStatus) != 0 {
		t.Fatalf("report: %s", b)
	}
	if rep.SustainedQPS <= 0 || rep.P50Ms <= 0 || rep.P99Ms < rep.P50Ms {
		t.Errorf("sustained %v p50 %v p99 %v", rep.SustainedQPS, rep.P50Ms, rep.P99Ms)
	}
	c := rep.Ceilings
	if c.Ed25519SignVerifyPerSec <= 0 || c.Ed25519SignPerSec <= 0 || c.Ed25519VerifyPerSec <= 0 || c.CryptoBoundQPS <= 0 || c.SQLiteCommitsPerSec <= 0 {
		t.Errorf("ceilings %+v", c)
	}
	if rep.Commit == nil || rep.Commit.Transactions == 0 {
		t.Errorf("commit stats %+v", rep.Commit)
	}
	if rep.StoppedBecause == "" {
		t.Error("no reason to stop")
	}
}
