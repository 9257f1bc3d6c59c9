package disclosure

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/runseal/runseal/store"
)

// perRun hides the store's store.BulkReader, so Export reads it one run
// at a time.
type perRun struct{ store.Journal }

// Issue 17 item 3: an export through store.BulkReader (a page of runs per
// query) is byte for byte the export read one run at a time, including a
// run longer than one read-ahead (its records continue page by page) and
// the runs after it (read ahead again).
func TestExport_PagedIsPerRunByteForByte(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	long := runID(0x40)
	for k := 0; k < exportPageRecords+500; k += 500 {
		batch := make([]store.Append, 500)
		for i := range batch {
			batch[i] = noteRec(long, store.CaseID{}, fmt.Sprint(k+i))
		}
		appendAll(t, w.j, 1, batch...)
	}
	for n := byte(0x41); n < 0x50; n++ {
		appendAll(t, w.j, 1, noteRec(runID(n), store.CaseID{}, "after"), conclude(runID(n), "succeeded"))
		seal(t, w.j, runID(n), 1, "succeeded")
	}
	if _, ok := store.Journal(w.j).(store.BulkReader); !ok {
		t.Fatal("the SQLite store is not a store.BulkReader")
	}
	paged := export(t, w.j)
	one := export(t, perRun{w.j})
	if !bytes.Equal(paged, one) {
		t.Fatalf("the paged export (%d bytes) differs from the per-run one (%d bytes)", len(paged), len(one))
	}
	target := openJournal(t, testOrigin)
	if rep, err := Restore(ctx, target, bytes.NewReader(paged)); err != nil || !rep.Faithful() {
		t.Fatalf("restore of the paged export: %+v %v", rep, err)
	}
}
