package main

import (
	"encoding/json"
	"runtime"
	"testing"
)

// TestBenchReport runs a tiny bench end to end and checks the report's
// shape: every point with its journal figures, both ceilings and ratios, and
// the scale section measured in child processes (this test binary, acting as
// the CLI).
func TestBenchReport(t *testing.T) {
	t.Setenv(childEnv, "cli") // children of this process run the CLI
	r := cli(t, "", "", "bench", "--json", "--dir", t.TempDir(), "--duration", "150ms",
		"--concurrency", "1,4", "--batch", "1,3", "--payload", "32", "--verify-records", "300")
	expect(t, r, exitOK)
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json is not one JSON document: %v\n%s", err, r.stdout)
	}
	if rep.Machine.NumCPU < 1 || rep.Machine.GOOS == "" || rep.FsyncPerSec <= 0 || rep.Settings.RecordBytes <= 32 {
		t.Errorf("machine/settings: %+v %+v fsync %v", rep.Machine, rep.Settings, rep.FsyncPerSec)
	}
	if len(rep.Points) != 4 {
		t.Fatalf("%d points, want 4", len(rep.Points))
	}
	for _, p := range rep.Points {
		for name, m := range map[string]measurement{"journal": p.Journal, "ceiling": p.Ceiling, "batched": p.CeilingBatched, "keyed": p.CeilingKeyed} {
			if m.Records == 0 || m.RecordsPerSec <= 0 || m.P50us <= 0 || m.P99us < m.P50us || m.Records%uint64(p.Batch) != 0 {
				t.Errorf("c=%d b=%d %s: %+v", p.Concurrency, p.Batch, name, m)
			}
		}
		if p.Ratio <= 0 || p.RatioBatched <= 0 {
			t.Errorf("c=%d b=%d: ratios %v %v", p.Concurrency, p.Batch, p.Ratio, p.RatioBatched)
		}
	}
	if rep.Targets == nil || rep.Targets.RatioTarget != targetRatio {
		t.Errorf("targets: %+v", rep.Targets)
	}
	// Two sizes, each: the build, then five operations in children.
	if len(rep.Scale) != 12 {
		t.Fatalf("%d scale points, want 12: %+v", len(rep.Scale), rep.Scale)
	}
	for _, s := range rep.Scale {
		if runtime.GOOS == "linux" && s.Op != "append (batches of 1000)" && s.PeakRSSMiB <= 0 {
			t.Errorf("%s: no peak RSS", s.Op)
		}
	}
}
