package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/store"
)

// BenchmarkReadRun_HotKeys measures reading a run of 1 or 16 records when
// the hot key table holds hot keys of other runs (every read scans it; see
// keys.go), against the same read with every key merged (hot=0): what the
// size mergeKeysAt (1536) lets the hot table reach costs a read.
func BenchmarkReadRun_HotKeys(b *testing.B) {
	for _, tc := range []struct{ hot, recs int }{{0, 1}, {0, 16}, {768, 16}, {1536, 1}, {1536, 16}, {4096, 16}} {
		hot, recs := tc.hot, tc.recs
		b.Run(fmt.Sprintf("hot=%d/records=%d", hot, recs), func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "j.db")
			at := 1 << 30 // no merge: the hot keys stay
			if hot == 0 {
				at = 1 // every key merged as it is written
			}
			s, err := Open(ctx, path, Options{mergeKeysAt: at})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			run := store.NewRunID()
			var batch []store.Append
			for i := range recs {
				batch = append(batch, store.Append{Run: run, Kind: "Note", Fields: []byte(fmt.Sprintf(`{"i":%d}`, i))})
			}
			if _, err := s.Append(ctx, 1, batch); err != nil {
				b.Fatal(err)
			}
			// 64 other runs, one record an append, hot keys apiece.
			others := make([]store.RunID, 64)
			for i := range others {
				others[i] = store.NewRunID()
			}
			var apps []store.BulkAppend
			for k := range max(hot, 64) {
				r := others[k%len(others)]
				apps = append(apps, store.BulkAppend{Epoch: 1, Batch: []store.Append{{Run: r, Kind: "Note", Fields: []byte(`{}`)}}})
				if len(apps) == 64 {
					if _, err := s.AppendBulk(ctx, apps); err != nil {
						b.Fatal(err)
					}
					apps = apps[:0]
				}
			}
			cold, hotKeys, _, _, _ := keyCounts(b, path)
			b.Logf("%d cold, %d hot keys", cold, hotKeys)
			b.ResetTimer()
			cpu0 := processCPU(b)
			for b.Loop() {
				got, err := s.Read(ctx, run, 1)
				if err != nil || len(got) != recs {
					b.Fatalf("read %d records, %v", len(got), err)
				}
			}
			// CPU per read is steadier than the time on a shared machine.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/read")
		})
	}
}
