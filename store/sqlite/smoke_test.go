package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/store"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "j.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := store.NewRunID()
	recs, err := s.Append(ctx, 1, []store.Append{
		{Run: run, Kind: "RunAdmitted", Fields: []byte(`{"admission_key":"k1","source":"api"}`)},
		{Run: run, Kind: "Note", Fields: []byte(`{"text":"hi"}`)},
		{Run: run, Kind: "RunConcluded", Fields: []byte(`{"outcome":"succeeded"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", recs[0].Raw)
	d, err := s.Verify(ctx, run)
	if err != nil || d != recs[2].Hash {
		t.Fatal(d, err)
	}
	leaf, err := s.Seal(ctx, run, 1, "succeeded")
	if err != nil || leaf != recs[2].Hash {
		t.Fatal(err)
	}
	_, err = s.Append(ctx, 1, []store.Append{{Run: run, Kind: "Note"}})
	t.Log(err)
}
