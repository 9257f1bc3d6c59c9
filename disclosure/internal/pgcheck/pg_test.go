// Package pgcheck runs the disclosure round trips against the PostgreSQL
// backend: a package written from it verifies, and an export moves a
// journal between SQLite and PostgreSQL with the same log.
package pgcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const origin = "example.com/pgcheck"

func openPG(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.DSN(t), postgres.Options{
		Tenant: "t" + strings.ToLower(ulid.Make().String()), Origin: origin, Schema: "pgcheck"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func fill(t *testing.T, j store.Journal) ([]store.RunID, store.CaseID) {
	t.Helper()
	ctx := context.Background()
	c := store.NewCaseID()
	var runs []store.RunID
	for i := range 12 {
		run := store.NewRunID()
		runs = append(runs, run)
		batch := []store.Append{
			{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(fmt.Sprintf(`{"admission_key":"k%d"}`, i))},
			{Run: run, Case: c, Kind: "Note", Fields: []byte(`{"text":"x","n":1.5}`)},
		}
		if i%3 != 2 {
			batch = append(batch, store.Append{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)})
		}
		if _, err := j.Append(ctx, store.Epoch(i%2+1), batch[:2]); err != nil {
			t.Fatal(err)
		}
		if len(batch) == 3 {
			if _, err := j.Append(ctx, 3, batch[2:]); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Seal(ctx, run, 3, "succeeded"); err != nil {
				t.Fatal(err)
			}
		}
	}
	return runs, c
}

func TestPackageFromPostgres(t *testing.T) {
	ctx := context.Background()
	j := openPG(t)
	runs, c := fill(t, j)
	skey, vkey, _ := checkpoint.GenerateLogKey(rand.Reader, j.Origin())
	signer, _ := checkpoint.NewSigner(skey)
	lv, _ := checkpoint.NewVerifier(vkey)
	csk, _, _ := checkpoint.GenerateCosignerKey(rand.Reader, "w.example")
	cos, _ := checkpoint.NewCosigner(csk)
	pol, _ := checkpoint.NewThresholdPolicy(1, cos.Verifier())
	cp, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: cp.Root}, signer, cos)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := pol.Verify(msg, lv)
	if err != nil {
		t.Fatal(err)
	}
	dsk, dvk, _ := checkpoint.GenerateLogKey(rand.Reader, j.Origin()+disclosure.DisclosureKeySuffix)
	ds, _ := checkpoint.NewSigner(dsk)
	dv, _ := checkpoint.NewVerifier(dvk)
	var buf bytes.Buffer
	if _, err := disclosure.WritePackage(ctx, j, &buf, disclosure.Selection{Runs: runs[:2], Cases: []store.CaseID{c}}, signed,
		disclosure.Signing{Recipient: "auditor@example.com", Key: ds}); err != nil {
		t.Fatal(err)
	}
	rep, err := disclosure.Verify(ctx, bytes.NewReader(buf.Bytes()), disclosure.Options{Logs: []note.Verifier{lv}, Policy: pol, Disclosure: []note.Verifier{dv}})
	if err != nil || rep.Verdict != disclosure.Sound || rep.Counts.Runs != 12 {
		t.Fatalf("%v %+v", err, rep)
	}
}

func TestExportBetweenBackends(t *testing.T) {
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	fill(t, lite)
	var exp bytes.Buffer
	if _, err := disclosure.Export(ctx, lite, &exp); err != nil {
		t.Fatal(err)
	}
	pg := openPG(t)
	rep, err := disclosure.Restore(ctx, pg, bytes.NewReader(exp.Bytes()))
	if err != nil || !rep.Faithful() || rep.Runs != 12 {
		t.Fatalf("restore into postgres: %v %+v", err, rep)
	}
	var back bytes.Buffer
	if _, err := disclosure.Export(ctx, pg, &back); err != nil {
		t.Fatal(err)
	}
	cut := func(b []byte) []byte { return b[bytes.IndexByte(b, '\n'):] }
	if !bytes.Equal(cut(exp.Bytes()), cut(back.Bytes())) {
		t.Fatal("postgres exports other runs than it restored")
	}
	lite2, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "k.db"), sqlite.Options{Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	defer lite2.Close()
	if rep, err := disclosure.Restore(ctx, lite2, bytes.NewReader(back.Bytes())); err != nil || !rep.Faithful() {
		t.Fatalf("restore back into sqlite: %v %+v", err, rep)
	}
}
