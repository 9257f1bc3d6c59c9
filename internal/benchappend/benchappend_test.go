package benchappend

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/runseal/runseal/keyring"
)

// TestPointAt_SealedBesideUnsealed measures one tiny point with a key ring
// and checks every workload wrote and was summarized, sealed included.
func TestPointAt_SealedBesideUnsealed(t *testing.T) {
	ring, err := keyring.OpenFile(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	fields := Fields(16)
	rb, err := RecordBytes(fields)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dir: t.TempDir(), Duration: 90 * time.Millisecond, Fields: fields, RecordBytes: rb, Ring: ring}
	p, err := PointAt(context.Background(), cfg, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Sealed == nil {
		t.Fatal("no sealed measurement with a key ring")
	}
	for name, m := range map[string]Measurement{"journal": p.Journal, "ceiling": p.Ceiling, "batched": p.CeilingBatched, "keyed": p.CeilingKeyed, "sealed": *p.Sealed} {
		if m.Records == 0 || m.Records%2 != 0 || m.RecordsPerSec <= 0 || m.P50us <= 0 || m.P99us < m.P50us {
			t.Errorf("%s: %+v", name, m)
		}
		// Every workload writes durably, so it spends CPU and, where the
		// platform counts them, passes bytes to write(2).
		if m.CPUusPerRecord <= 0 || (runtime.GOOS == "linux" && m.WrittenBytesPerRecord <= 0) {
			t.Errorf("%s: %.1f CPU µs and %.0f bytes written per record", name, m.CPUusPerRecord, m.WrittenBytesPerRecord)
		}
	}
	if p.Ratio <= 0 || p.RatioBatched <= 0 || p.SealedRatio <= 0 {
		t.Errorf("ratios %v %v %v", p.Ratio, p.RatioBatched, p.SealedRatio)
	}
	scopes, err := ring.Scopes(context.Background())
	if err != nil || len(scopes) != 3 {
		t.Errorf("sealed workload made %d scopes (%v), want one per appender (3)", len(scopes), err)
	}
}

func TestJudge(t *testing.T) {
	m := func(r float64) Measurement { return Measurement{RecordsPerSec: r} }
	sealed := func(r float64) *Measurement { s := m(r); return &s }
	tests := []struct {
		name      string
		points    []Point
		ratioMet  bool
		rateMet   bool
		sealedMet bool
		minSealed float64
		below     string
	}{
		{"all met", []Point{
			{Concurrency: 1, Batch: 1, Journal: m(100), RatioBatched: 0.9, Ratio: 1},
			{Concurrency: 64, Batch: 1, Journal: m(6000), RatioBatched: 0.6, Ratio: 2, Sealed: sealed(5000), SealedRatio: 0.83},
		}, true, true, true, 0.83, ""},
		{"one point below, sealed below", []Point{
			{Concurrency: 8, Batch: 16, Journal: m(100), RatioBatched: 0.49},
			{Concurrency: 64, Batch: 1, Journal: m(4000), RatioBatched: 0.7, Sealed: sealed(2000), SealedRatio: 0.5},
			{Concurrency: 64, Batch: 16, Journal: m(4000), RatioBatched: 0.7, Sealed: sealed(3600), SealedRatio: 0.9},
		}, false, false, false, 0.5, "c=8 b=16 at 0.49 of batched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(tt.points)
			if v.RatioBatchedMet != tt.ratioMet || v.RecordsPerSecMet != tt.rateMet || v.SealedRatioMet != tt.sealedMet ||
				v.MinSealedRatioAt64 != tt.minSealed || v.BelowBatched != tt.below {
				t.Errorf("Judge = %+v", v)
			}
		})
	}
}
