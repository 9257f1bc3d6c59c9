package storetest

// Disclosure register: acts of disclosure are kept beside the journal.

import (
	"time"

	"github.com/runseal/runseal/store"
)

func checkDisclosureRegister(t *T) {
	j, _ := t.Open()
	reg, ok := j.(register)
	if !ok {
		t.Fatalf("the journal keeps no disclosure register")
	}
	mk := func() store.Disclosure {
		return store.Disclosure{ID: "dsc_" + store.NewRunID().String(), At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			By: store.Operator{Actor: "alice", Basis: store.Authenticated}, Recipient: "auditor@example.com",
			Runs: []store.RunID{store.NewRunID()}, Checkpoint: store.Checkpoint{Origin: "o", Size: 3, Root: key("root")},
			Package: key("package"), Bytes: 1234, Carried: 1, Sealed: 1, Records: 5}
	}
	a, b := mk(), mk()
	for _, d := range []store.Disclosure{a, b} {
		if err := reg.RecordDisclosure(t.ctx, d); err != nil {
			t.Fatalf("RecordDisclosure: %v", err)
		}
	}
	err := reg.RecordDisclosure(t.ctx, a)
	expect[*store.InvalidArgumentError](t, err, "recording one act twice")
	bad := mk()
	bad.Recipient = ""
	err = reg.RecordDisclosure(t.ctx, bad)
	expect[*store.InvalidArgumentError](t, err, "an act with no recipient")
	got, err := reg.Disclosures(t.ctx, "", 10)
	if err != nil || len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Fatalf("Disclosures = %+v, %v, want the two acts oldest first", got, err)
	}
	if got[0].Package != a.Package || got[0].Checkpoint != a.Checkpoint || got[0].Runs[0] != a.Runs[0] || got[0].Records != 5 || !got[0].At.Equal(a.At) {
		t.Errorf("the register changed the act: %+v, want %+v", got[0], a)
	}
	if page, _ := reg.Disclosures(t.ctx, a.ID, 10); len(page) != 1 || page[0].ID != b.ID {
		t.Errorf("Disclosures after the first = %+v", page)
	}
}
