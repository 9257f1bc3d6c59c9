package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/runseal/runseal/internal/measure"
	"github.com/runseal/runseal/store"
)

// sealedRuns opens a new journal in a temporary directory holding n sealed
// runs, each a note of about 4 KiB and its conclusion, written in bulk.
func sealedRuns(t *testing.T, n int) (*Store, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	note := []byte(`{"pad":"` + strings.Repeat("x", 4000) + `"}`)
	const chunk = 200
	for lo := 0; lo < n; lo += chunk {
		var apps []store.BulkAppend
		var seals []store.BulkSeal
		for range min(chunk, n-lo) {
			run := store.NewRunID()
			apps = append(apps, store.BulkAppend{Epoch: 1, Batch: []store.Append{
				{Run: run, Kind: "Note", Fields: note},
				{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
			}})
			seals = append(seals, store.BulkSeal{Run: run, Epoch: 1, Outcome: "succeeded"})
		}
		if _, err := s.AppendBulk(ctx, apps); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SealBulk(ctx, seals); err != nil {
			t.Fatal(err)
		}
	}
	return s, path
}

// mappedKiB is how much of the file at path is mapped into this process
// and resident, summed over every mapping of it (/proc/self/smaps).
func mappedKiB(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps to read resident mappings from: %v", err)
	}
	defer f.Close()
	var kib int64
	ours := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			ours = len(fields) >= 6 && fields[5] == path
		case ours && len(fields) == 3 && fields[0] == "Rss:":
			n, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			kib += n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kib
}

// verifyAllPeak runs store.VerifyAll over c and returns how far the live
// heap and, when mapped is set, the resident mapped pages of the file at
// path grew above where they were before, at their peaks (sampled every 200
// runs and at the end, the heap after a collection).
func verifyAllPeak(t *testing.T, c store.AllChecker, path string, runs int, mapped bool) (mappedGrowthKiB int64, heapGrowth uint64) {
	t.Helper()
	resident := func() int64 {
		if !mapped {
			return 0
		}
		return mappedKiB(t, path)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0, mapped0 := ms.HeapAlloc, resident()
	var peakHeap uint64
	var peakMapped int64
	sample := func() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapAlloc)
		peakMapped = max(peakMapped, resident())
	}
	seen := 0
	sum, err := store.VerifyAll(context.Background(), c, func(*store.RunVerdict) error {
		if seen++; seen%200 == 0 {
			sample()
		}
		return nil
	})
	if err != nil || sum.Runs != uint64(runs) || sum.Failed != 0 || !sum.LogOK {
		t.Fatalf("verify all: %+v %v", sum, err)
	}
	sample()
	return max(peakMapped-mapped0, 0), peakHeap - min(peakHeap, heap0)
}

// verify --all over a whole journal through the read pool's memory map
// left every page it touched resident in the process: RSS grew with the
// file (10^5 runs: 168 MB). The Checker reads on a connection whose map is
// off (TestChecker_ReadsOffTheMap, in every run). Here the effect itself:
// through the Checker the file's resident mapped pages do not grow at all,
// and the live heap (what the check keeps, after a collection) stays flat,
// for a journal 8 times as big; the pool's own map, checked in the same
// test, does grow, so the measure sees what it guards against. What is
// resident is the kernel's to decide, so the mapped pages are asserted only
// with RUNSEAL_MEASURE=1; the live heap, which the code decides, always.
func TestChecker_WholeFileNotResident(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes two journals of several MB and measures memory (not under -race)")
	}
	mapped := measure.Enabled() && runtime.GOOS == "linux" // /proc/self/smaps
	ctx := context.Background()
	type point struct {
		runs               int
		checkerKiB, mapKiB int64
		heap               uint64
		fileKiB            int64
	}
	measureAt := func(n int) point {
		s, path := sealedRuns(t, n)
		if err := s.Close(); err != nil { // the writes' WAL into the file
			t.Fatal(err)
		}
		// NoWarm: the warm's node cache fill maps pages through the pool
		// while the Checker is measured.
		s, err := Open(ctx, path, Options{NoWarm: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Checker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := point{runs: n, fileKiB: fi.Size() >> 10}
		p.checkerKiB, p.heap = verifyAllPeak(t, c, path, n, mapped)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if mapped {
			// The control, last: the pool's connections keep their maps.
			p.mapKiB, _ = verifyAllPeak(t, s, path, n, mapped)
		}
		return p
	}
	small, large := measureAt(100), measureAt(800)
	for _, p := range []point{small, large} {
		t.Logf("%d runs, file %d KiB: resident mapped pages grew %d KiB through the Checker, %d KiB through the pool's map (measured: %v); live heap grew %d bytes",
			p.runs, p.fileKiB, p.checkerKiB, p.mapKiB, mapped, p.heap)
	}
	if large.heap > small.heap+256<<10 {
		t.Fatalf("verify all's live heap grew from %d to %d bytes with 8 times the runs", small.heap, large.heap)
	}
	if !mapped {
		return
	}
	if small.checkerKiB != 0 || large.checkerKiB != 0 {
		t.Fatalf("the Checker left %d KiB (100 runs) and %d KiB (800 runs) of the file mapped and resident", small.checkerKiB, large.checkerKiB)
	}
	if large.mapKiB < large.fileKiB/2 {
		t.Fatalf("the pool's map left %d KiB of a %d KiB file resident: the measure does not see the map", large.mapKiB, large.fileKiB)
	}
}

// TestChecker_ReadsOffTheMap: what keeps verify --all's pass over the
// whole file out of the process's resident set, in every run: the
// Checker reads on one connection whose memory map is off, and gives it
// back to the pool with its map on again.
func TestChecker_ReadsOffTheMap(t *testing.T) {
	ctx := context.Background()
	s, _ := sealedRuns(t, 3)
	mmapOf := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int64 {
		t.Helper()
		var n int64
		if err := q.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	c, err := s.Checker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := mmapOf(c.conn); got != 0 {
		t.Fatalf("the Checker reads on a connection with mmap_size %d, want 0 (off the map)", got)
	}
	if sum, err := store.VerifyAll(ctx, c, nil); err != nil || sum.Runs != 3 || sum.Failed != 0 || !sum.LogOK {
		t.Fatalf("verify all through the Checker: %+v %v", sum, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The pool's connections, that one among them, have their map.
	conns := make([]*sql.Conn, 0, 4)
	for range cap(conns) {
		conn, err := s.rdb.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		if got := mmapOf(conn); got <= 0 {
			t.Errorf("a pool connection after the Checker has mmap_size %d, want its map back", got)
		}
	}
	for _, conn := range conns {
		conn.Close()
	}
}

// The Checker gives the Store's verdicts: every run and the log intact,
// then each tampering of the file below found, with the same summary.
func TestChecker_SameVerdictsAsStore(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, sql string
		failed    uint64
		logOK     bool
	}{
		{"intact", ``, 0, true},
		{"record bytes changed", `UPDATE records SET raw = CAST(replace(CAST(raw AS TEXT), 'xxxx', 'xxxy') AS BLOB) WHERE rowid = (SELECT min(rowid) FROM records)`, 1, true},
		{"zeroed log node", `UPDATE log_nodes SET hash = zeroblob(32) WHERE level = 1 AND idx = 0`, 0, false},
		{"sealed run out of the log", `UPDATE runs SET log_index = NULL, leaf = NULL WHERE run = (SELECT min(run) FROM runs)`, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := sealedRuns(t, 6)
			if tc.sql != "" {
				db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if res, err := db.Exec(tc.sql); err != nil {
					t.Fatal(err)
				} else if n, _ := res.RowsAffected(); n != 1 {
					t.Fatalf("the tampering changed %d rows", n)
				}
			}
			c, err := s.Checker(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got, want store.VerifySummary
			var gotLines, wantLines []string
			line := func(to *[]string) func(*store.RunVerdict) error {
				return func(v *store.RunVerdict) error {
					*to = append(*to, fmt.Sprintf("%+v %v", *v, v.Head))
					return nil
				}
			}
			if got, err = store.VerifyAll(ctx, c, line(&gotLines)); err != nil {
				t.Fatal(err)
			}
			if want, err = store.VerifyAll(ctx, s, line(&wantLines)); err != nil {
				t.Fatal(err)
			}
			if got.Runs != 6 || got.Failed != tc.failed || got.LogOK != tc.logOK {
				t.Fatalf("Checker: %d runs, %d failed, log ok %v (%s); want 6, %d, %v", got.Runs, got.Failed, got.LogOK, got.LogError, tc.failed, tc.logOK)
			}
			got.FirstFailure, want.FirstFailure = nil, nil
			if got != want || strings.Join(gotLines, "\n") != strings.Join(wantLines, "\n") {
				t.Fatalf("Checker: %+v\n%s\nStore: %+v\n%s", got, strings.Join(gotLines, "\n"), want, strings.Join(wantLines, "\n"))
			}
		})
	}
}
