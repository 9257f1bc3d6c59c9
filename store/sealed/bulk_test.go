package sealed_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// TestBulk_ExportIsTheInnerStoresByteForByte: a sealed journal over a
// store that reads in bulk keeps store.BulkReader, and its export (paged,
// with no key opened) is byte for byte the inner store's export, sealed
// fields as stored.
func TestBulk_ExportIsTheInnerStoresByteForByte(t *testing.T) {
	ctx := context.Background()
	inner, _ := openSQLite(t)
	j := sealed.New(inner, openRing(t), sealed.Options{})
	if _, ok := store.Journal(j).(store.BulkReader); ok {
		t.Fatal("a sealing Journal claims store.BulkReader by itself")
	}
	b, ok := j.WithBulk()
	if !ok {
		t.Fatal("WithBulk over a SQLite store: not a bulk reader")
	}
	// Sealed runs of a case, and open runs scoped by their run.
	c := store.NewCaseID()
	for i := 0; i < 3; i++ {
		caseRun(t, b, c, "GraceHopper")
	}
	for i := 0; i < 2; i++ {
		if _, err := b.Append(ctx, 1, []store.Append{{Run: store.NewRunID(), Kind: "Note", Fields: []byte(`{"secret":"GraceHopper"}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	var viaSealed, viaInner bytes.Buffer
	if _, err := disclosure.Export(ctx, b, &viaSealed); err != nil {
		t.Fatal(err)
	}
	if _, err := disclosure.Export(ctx, inner, &viaInner); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(viaSealed.Bytes(), viaInner.Bytes()) {
		t.Fatalf("the sealed journal's export differs from its store's:\n%s\nvs\n%s", viaSealed.Bytes(), viaInner.Bytes())
	}
	if bytes.Contains(viaSealed.Bytes(), []byte("GraceHopper")) || !bytes.Contains(viaSealed.Bytes(), []byte(sealed.EnvelopePrefix)) {
		t.Fatal("the export does not hold the sealed bytes as stored")
	}
	// Through the run-by-run path (the Journal alone) the export is the
	// same bytes too: paging changes the speed, not the file.
	var perRun bytes.Buffer
	if _, err := disclosure.Export(ctx, j, &perRun); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(perRun.Bytes(), viaInner.Bytes()) {
		t.Fatal("the sealed journal's run-by-run export differs from its store's")
	}
}
