package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/runseal/runseal/store"
)

func testDisclosure(run store.RunID, c store.CaseID) store.Disclosure {
	return store.Disclosure{
		ID:         "dsc_" + ulid.Make().String(),
		At:         time.Unix(1700000000, 123).UTC(),
		By:         store.Operator{Actor: "alice", Basis: store.Authenticated},
		Recipient:  "auditor@example.com",
		Runs:       []store.RunID{run},
		Cases:      []store.CaseID{c},
		Checkpoint: store.Checkpoint{Origin: "example.com/log", Size: 7, Root: store.Sum([]byte("root"))},
		Package:    store.Sum([]byte("package")),
		Bytes:      1234,
		Carried:    3, Sealed: 2, Records: 40,
	}
}

func TestDisclosureRegister(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	other := open(t, path, Options{Tenant: "other"})

	d1 := testDisclosure(store.NewRunID(), store.NewCaseID())
	d2 := testDisclosure(store.NewRunID(), store.NewCaseID())
	d2.Cases = nil
	for _, d := range []store.Disclosure{d1, d2} {
		if err := s.RecordDisclosure(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	var ia *store.InvalidArgumentError
	if err := s.RecordDisclosure(ctx, d1); !errors.As(err, &ia) {
		t.Fatalf("second record of one id: %v", err)
	}
	bad := d1
	bad.ID = "dsc_x"
	if err := s.RecordDisclosure(ctx, bad); !errors.As(err, &ia) {
		t.Fatalf("malformed id: %v", err)
	}
	bad = testDisclosure(store.NewRunID(), store.NewCaseID())
	bad.Recipient = "a\nb"
	if err := s.RecordDisclosure(ctx, bad); !errors.As(err, &ia) {
		t.Fatalf("recipient with a newline: %v", err)
	}

	got, err := s.Disclosures(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	d2.Cases = []store.CaseID{}
	if len(got) != 2 || !reflect.DeepEqual(got[0], d1) || !reflect.DeepEqual(got[1], d2) {
		t.Fatalf("Disclosures = %+v\nwant %+v and %+v", got, d1, d2)
	}
	if page, err := s.Disclosures(ctx, d1.ID, 10); err != nil || len(page) != 1 || page[0].ID != d2.ID {
		t.Fatalf("page after the first: %v %v", page, err)
	}
	if page, err := other.Disclosures(ctx, "", 10); err != nil || len(page) != 0 {
		t.Fatalf("another tenant sees %v %v", page, err)
	}
	if _, err := s.Disclosures(ctx, "", 0); !errors.As(err, &ia) {
		t.Fatalf("limit 0: %v", err)
	}
}

// A file made before the register existed gains it on open.
func TestSchemaOneGainsRegister(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	open(t, path, Options{}).Close()
	tamper(t, path, `DROP TABLE disclosures`)
	tamper(t, path, `UPDATE meta SET value='1' WHERE key='schema'`)
	s := open(t, path, Options{})
	if err := s.RecordDisclosure(ctx, testDisclosure(store.NewRunID(), store.NewCaseID())); err != nil {
		t.Fatalf("record after upgrade: %v", err)
	}
}
