package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestVerifyRefusesRecordsPastHead: a record stored past the run's head is
// not part of any verified chain, yet Read returns it. Verify must not call
// such a run intact. The sharpest case is a sealed run: a record chained
// onto its sealed head by writing the file directly would read back as part
// of the run while Verify still returned the leaf.
func TestVerifyRefusesRecordsPastHead(t *testing.T) {
	// The forger writes the record's row and its key, in either key table
	// (keys.go): a row without a key is no record of any run.
	for _, keys := range []string{"record_keys_hot", "record_keys"} {
		t.Run(keys, func(t *testing.T) { testVerifyRefusesRecordPastHead(t, keys) })
	}
}

func testVerifyRefusesRecordPastHead(t *testing.T, keys string) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := store.NewRunID()
	recs, err := s.Append(ctx, 1, []store.Append{
		{Run: run, Kind: "Note"},
		{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, run, 1, "succeeded"); err != nil {
		t.Fatal(err)
	}
	// Forge seq 3, correctly chained onto the sealed head, into records only.
	raw, err := store.EncodeBody(store.Body{Seq: 3, Run: run, Epoch: 1, V: store.RecordVersion, Kind: "Note", Fields: []byte(`{"forged":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	hash := store.ChainHash(recs[1].Hash, raw)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`INSERT INTO records(tenant, run, seq, kind, prev_hash, hash, raw) VALUES('default', ?, 3, 'Note', ?, ?, ?)`,
		run.String(), recs[1].Hash[:], hash[:], raw)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO `+keys+`(tenant, run, seq, id, n) VALUES('default', ?, 3, ?, 1)`, run.String(), id); err != nil {
		t.Fatal(err)
	}
	var ce *store.CorruptError
	if all, err := s.Read(ctx, run, 1); !errors.As(err, &ce) || ce.Seq != 3 {
		t.Fatalf("Read returns %d records (%v): the forged record reads as part of the run", len(all), err)
	}
	_, err = s.Verify(ctx, run)
	if !errors.As(err, &ce) || ce.Seq != 3 {
		t.Fatalf("Verify = %v, want CorruptError at seq 3 (a record past the head)", fmt.Sprint(err))
	}
}
