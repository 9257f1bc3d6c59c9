package sealed_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// TestRestoreThroughSealingStore_WritesRecordedBytes: an export of a sealed
// journal, restored through a sealing store, is stored byte for byte (not
// sealed a second time), rebuilds the same log, needs no key to write, and
// opens with the key ring afterwards.
func TestRestoreThroughSealingStore_WritesRecordedBytes(t *testing.T) {
	ctx := context.Background()
	src, _ := openSQLite(t)
	ring := openRing(t)
	j := sealed.New(src, ring, sealed.Options{})
	c := store.NewCaseID()
	run := caseRun(t, j, c, "GraceHopper")
	var exp bytes.Buffer
	if _, err := disclosure.Export(ctx, j, &exp); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(exp.Bytes(), []byte("GraceHopper")) {
		t.Fatalf("the export of a sealed journal holds caller data in the clear")
	}
	dst, _ := openSQLite(t)
	target := sealed.New(dst, ring, sealed.Options{})
	if _, err := disclosure.Restore(ctx, target, bytes.NewReader(exp.Bytes())); err != nil {
		t.Fatalf("restore through the sealing store: %v", err)
	}
	a, _ := src.Read(ctx, run, 1)
	b, _ := dst.Read(ctx, run, 1)
	if len(a) != len(b) {
		t.Fatalf("restored %d records of %d", len(b), len(a))
	}
	for i := range a {
		if !bytes.Equal(a[i].Raw, b[i].Raw) || a[i].Hash != b[i].Hash {
			t.Fatalf("seq %d was rewritten by the restore", i+1)
		}
	}
	ca, _ := src.Checkpoint(ctx)
	cb, _ := dst.Checkpoint(ctx)
	if ca.Root != cb.Root || ca.Size != cb.Size {
		t.Fatalf("restored log %+v, original %+v", cb, ca)
	}
	opened, err := target.Read(ctx, run, 1)
	if err != nil || !bytes.Contains(opened[0].Fields, []byte("GraceHopper")) {
		t.Fatalf("restored payloads do not open with the key ring: %v", err)
	}
}
