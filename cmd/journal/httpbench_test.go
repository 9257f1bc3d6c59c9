package main

import (
	"encoding/json"
	"testing"
)

// TestBenchHTTPReport runs 'bench --http' end to end on a tiny load: a
// child 'journal serve' (this test binary acting as the CLI), driven by
// clients each on their own leased run, beside the store's own rate.
func TestBenchHTTPReport(t *testing.T) {
	t.Setenv(childEnv, "cli") // children of this process run the CLI
	r := cli(t, "", "", "bench", "--http", "--json", "--dir", t.TempDir(), "--duration", "200ms", "--concurrency", "2,5")
	expect(t, r, exitOK)
	var rep httpBenchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --http --json is not one JSON document: %v\n%s", err, r.stdout)
	}
	if len(rep.Points) != 2 || rep.Record < 150 || rep.Record > 250 {
		t.Fatalf("report: %+v", rep)
	}
	for _, p := range rep.Points {
		if p.Max.Done == 0 || p.Max.Failed != 0 || p.Open.Done == 0 || p.Open.Failed != 0 || p.Open.Offered <= 0 || p.Store.RecordsPerSec <= 0 || p.Ratio <= 0 {
			t.Errorf("clients %d: %+v", p.Clients, p)
		}
	}
}
