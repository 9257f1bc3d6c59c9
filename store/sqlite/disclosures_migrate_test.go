package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/store"
)

// A version 2 journal's register gains the signed_by column when opened by
// this version, keeps its rows, and records which key signed new acts.
func TestDisclosureRegister_MigratesSignedBy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := testDisclosure(store.NewRunID(), store.NewCaseID())
	if err := s.RecordDisclosure(ctx, old); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Make the file what version 2 wrote.
	tamper(t, path, `ALTER TABLE disclosures DROP COLUMN signed_by`)
	tamper(t, path, `UPDATE meta SET value='2' WHERE key='schema'`)

	s = open(t, path, Options{})
	d := testDisclosure(store.NewRunID(), store.NewCaseID())
	d.SignedBy = "example.com/log/disclosure+01234567"
	if err := s.RecordDisclosure(ctx, d); err != nil {
		t.Fatal(err)
	}
	acts, err := s.Disclosures(ctx, "", 10)
	if err != nil || len(acts) != 2 {
		t.Fatalf("%d acts, %v", len(acts), err)
	}
	byID := map[string]store.Disclosure{acts[0].ID: acts[0], acts[1].ID: acts[1]}
	if byID[old.ID].SignedBy != "" || byID[d.ID].SignedBy != d.SignedBy {
		t.Fatalf("signed_by after migration: %+v", acts)
	}
}
