package disclosure

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// perRun hides the store's store.BulkReader, so Export reads it one run
// at a time: the export as it was before pages.
type perRun struct{ store.Journal }

// withPages sets the export's page limits for one test.
func withPages(t *testing.T, records, bytes int) {
	t.Helper()
	r, b := exportPageRecords, exportPageBytes
	exportPageRecords, exportPageBytes = records, bytes
	t.Cleanup(func() { exportPageRecords, exportPageBytes = r, b })
}

// manyRuns fills j with n runs of 1 to 9 records (one of them a long run
// of several pages), every third sealed, every third concluded "failed"
// and open, the rest open without a conclusion, with ids interleaved with
// the other tenant's by id (tag tells the tenants' ids apart).
func manyRuns(t *testing.T, j store.Journal, n int, tag byte) (sealed int) {
	t.Helper()
	for i := range n {
		u := fixedID(byte(i))
		u[10], u[11] = byte(i>>8), tag
		run := store.RunID(u)
		k := i%9 + 1
		if i == n/2 {
			k = 300 // spans many pages
		}
		for from := 0; from < k; from += 100 {
			var batch []store.Append
			for s := from; s < min(from+100, k); s++ {
				batch = append(batch, noteRec(run, store.CaseID{}, fmt.Sprintf("tenant %d run %d record %d %s", tag, i, s, bytes.Repeat([]byte("é"), i%50))))
			}
			appendAll(t, j, 1, batch...)
		}
		switch i % 3 {
		case 0:
			appendAll(t, j, 1, conclude(run, "succeeded"))
			seal(t, j, run, 1, "succeeded")
			sealed++
		case 1:
			appendAll(t, j, 1, conclude(run, "failed"))
		}
	}
	return sealed
}

// Issue 17 item 3: the paged export (store.BulkReader, two range scans a
// page) is byte for byte the export read one run at a time, on a file of
// two tenants with sealed, concluded-open and open runs, whatever the page
// limits: runs cut across page boundaries by records or by bytes, one
// record a page, and the defaults; and it restores faithfully.
func TestExport_PagedIsPerRunByteForByte(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	var js []*sqlite.Store
	for _, tenant := range []string{"acme", "globex"} {
		j, err := sqlite.Open(ctx, path, sqlite.Options{Origin: testOrigin, Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		js = append(js, j)
	}
	manyRuns(t, js[0], 120, 1)
	manyRuns(t, js[1], 40, 2)
	if _, ok := store.Journal(js[0]).(store.BulkReader); !ok {
		t.Fatal("the SQLite store is not a store.BulkReader")
	}
	for ti, j := range js {
		one := export(t, perRun{j})
		for _, lim := range []struct{ records, bytes int }{{7, 1 << 20}, {1, 1 << 20}, {10000, 1}, {50, 900}, {exportPageRecords, exportPageBytes}} {
			t.Run(fmt.Sprintf("tenant%d/records%d/bytes%d", ti, lim.records, lim.bytes), func(t *testing.T) {
				withPages(t, lim.records, lim.bytes)
				if paged := export(t, j); !bytes.Equal(paged, one) {
					t.Fatalf("the paged export (%d bytes) differs from the per-run one (%d bytes)", len(paged), len(one))
				}
			})
		}
		target := openJournal(t, testOrigin)
		if rep, err := Restore(ctx, target, bytes.NewReader(one)); err != nil || !rep.Faithful() {
			t.Fatalf("restore of tenant %d's paged export: %+v %v", ti, rep, err)
		}
	}
}

// A record whose run row is missing (deleted behind the store's back) is
// refused by the paged export, not silently left out of it.
func TestExport_DeletedRunRowRefused(t *testing.T) {
	j, db := tamperable(t)
	manyRuns(t, j, 5, 1)
	run := store.RunID(fixedID(2))
	run[11] = 1
	if res, err := db.Exec(`DELETE FROM runs WHERE run = ?`, run.String()); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("deleted %d run rows", n)
	}
	var buf bytes.Buffer
	var ce *store.CorruptError
	if _, err := Export(context.Background(), j, &buf); !errors.As(err, &ce) || ce.Run != run {
		t.Fatalf("export without run %s's row: %v, want a CorruptError naming it", run, err)
	}
}

// A record's raw bytes changed behind the store's back no longer match its
// hash: the paged export refuses the run rather than write bytes Restore
// would refuse (or, worse, that a later restore could not tell apart).
func TestExport_TamperedRawRefused(t *testing.T) {
	j, db := tamperable(t)
	manyRuns(t, j, 5, 1)
	run := store.RunID(fixedID(4))
	run[11] = 1
	if res, err := db.Exec(`UPDATE records SET raw = CAST(replace(CAST(raw AS TEXT), 'record 1', 'record 9') AS BLOB) WHERE run = ? AND seq = 2`, run.String()); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("changed %d records", n)
	}
	withPages(t, 3, 1<<20) // the tampered record opens a page
	var buf bytes.Buffer
	var ce *store.CorruptError
	if _, err := Export(context.Background(), j, &buf); !errors.As(err, &ce) || ce.Run != run || ce.Seq != 2 {
		t.Fatalf("export with run %s's record 2 tampered: %v, want a CorruptError naming it", run, err)
	}
}

// tamperable opens a journal and the same file behind the store's back.
func tamperable(t *testing.T) (*sqlite.Store, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := sqlite.Open(context.Background(), path, sqlite.Options{Origin: testOrigin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return j, db
}

// heapSampler is a store.BulkReader that samples the live heap (after a
// collection) before each page it reads.
type heapSampler struct {
	*sqlite.Store
	peak  uint64
	pages int
}

func (h *heapSampler) ScanRuns(ctx context.Context, p *store.RunsPage, after store.RunCursor, limit, maxBytes int) error {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
	h.pages++
	return h.Store.ScanRuns(ctx, p, after, limit, maxBytes)
}

// Issue 17 item 3: the paged export's memory does not grow with the
// journal: the live heap's peak over an export of 8 times as many runs
// (each about 530 export bytes) stays within a few pages of the small one's.
func TestExport_MemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("restores two synthetic journals")
	}
	withPages(t, 10000, 16<<10)
	peak := func(n int) (uint64, int) {
		exp := filepath.Join(t.TempDir(), "synth.jsonl")
		writeSynthExport(t, exp, n, synthKey)
		j := openJournal(t, testOrigin)
		f, err := os.Open(exp)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := Restore(context.Background(), j, f); err != nil {
			t.Fatal(err)
		}
		// The store's own caches (the log's nodes) are the store's: the
		// baseline is taken after the checkpoint Export begins with.
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		h := &heapSampler{Store: j}
		sum, err := Export(context.Background(), h, discard{})
		if err != nil || sum.Runs != uint64(n) {
			t.Fatalf("export of %d runs: %+v %v", n, sum, err)
		}
		return h.peak - min(h.peak, ms.HeapAlloc), h.pages
	}
	small, _ := peak(300)
	large, pages := peak(2400)
	t.Logf("live heap growth over the export: %d bytes for 300 runs, %d bytes for 2400 runs (%d pages)", small, large, pages)
	if pages < 15 {
		t.Fatalf("the large export read %d pages; the test needs many", pages)
	}
	if large > small+256<<10 {
		t.Fatalf("the export's live heap grew from %d to %d bytes with 8 times the runs", small, large)
	}
}

// discard is io.Discard without its ReaderFrom, so the export writes
// through its own buffer as it does to a file.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// The paged export finds a run's conclusions by the store's kind column; a
// column that hides a sealed run's conclusion leaves the seal without a
// sealing conclusion, and the export refuses the run rather than trust
// the seal.
func TestExport_KindColumnHidingConclusionRefused(t *testing.T) {
	j, db := tamperable(t)
	manyRuns(t, j, 5, 1)
	run := store.RunID(fixedID(3)) // i = 3: sealed "succeeded"
	run[11] = 1
	if res, err := db.Exec(`UPDATE records SET kind = 'Note' WHERE run = ? AND kind = 'RunConcluded'`, run.String()); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("changed %d records", n)
	}
	var buf bytes.Buffer
	var ce *store.CorruptError
	if _, err := Export(context.Background(), j, &buf); !errors.As(err, &ce) || ce.Run != run {
		t.Fatalf("export with run %s's conclusion hidden: %v, want a CorruptError naming it", run, err)
	}
}
