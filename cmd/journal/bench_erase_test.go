package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/keyring"
)

// TestBenchErase_ErasesBothCasesAndTouchesNoRecord runs the erase
// measurement small: both cases' scopes end erased in the ring, each of
// their runs keeps its head, and the figures are filled in.
func TestBenchErase_ErasesBothCasesAndTouchesNoRecord(t *testing.T) {
	dir := t.TempDir()
	ring, err := keyring.OpenFile(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	e, err := benchErase(context.Background(), dir, ring, 2500)
	if err != nil {
		t.Fatal(err)
	}
	if e.Records != 2500 || e.Runs != 3 || !e.Untouched || e.KeyMicros <= 0 || e.EraseMicros <= 0 {
		t.Fatalf("erase bench = %+v", e)
	}
	scopes, err := ring.Scopes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	erased := 0
	for _, s := range scopes {
		if s.Erased {
			erased++
		}
	}
	if erased != 2 {
		t.Fatalf("%d erased scopes after the bench, want its 2 cases: %+v", erased, scopes)
	}
}
