package disclosure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

func export(t testing.TB, j store.Journal) []byte {
	t.Helper()
	var buf bytes.Buffer
	sum, err := Export(context.Background(), j, &buf)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if sum.Bytes != int64(buf.Len()) || sum.SHA256 != store.Sum(buf.Bytes()) {
		t.Fatalf("summary %+v", sum)
	}
	return buf.Bytes()
}

func TestExportRestoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	want, _ := w.j.Checkpoint(ctx)

	target := openJournal(t, "example.com/restored")
	rep, err := Restore(ctx, target, bytes.NewReader(exp))
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if !rep.Faithful() || rep.Runs != 5 || rep.Sealed != 3 || rep.Records != 16 || !rep.OriginChanged || rep.Awaiting != 1 {
		t.Fatalf("report %+v", rep)
	}
	got, _ := target.Checkpoint(ctx)
	if got.Size != want.Size || got.Root != want.Root {
		t.Fatalf("rebuilt %+v, want %+v", got, want)
	}
	// Every run's records are the same bytes, and the derived indexes were
	// rebuilt by the store's own append.
	for _, run := range []store.RunID{w.A, w.B, w.C, w.D, w.E} {
		a, err := w.j.Read(ctx, run, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := target.Read(ctx, run, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != len(b) {
			t.Fatalf("run %s: %d records, restored %d", run, len(a), len(b))
		}
		for i := range a {
			if !bytes.Equal(a[i].Raw, b[i].Raw) || a[i].Hash != b[i].Hash {
				t.Fatalf("run %s seq %d differs", run, i+1)
			}
		}
		pa, _ := w.j.LogPositions(ctx, []store.RunID{run})
		pb, _ := target.LogPositions(ctx, []store.RunID{run})
		if (pa[0] == nil) != (pb[0] == nil) || (pa[0] != nil && *pa[0] != *pb[0]) {
			t.Fatalf("run %s position %v, restored %v", run, pa[0], pb[0])
		}
	}
	if holder, ok, _ := target.AdmittedAs(ctx, "order-B"); !ok || holder != w.B {
		t.Fatal("admission index not rebuilt")
	}
	if n, _ := target.CountByOutcome(ctx, "failed"); n != 1 {
		t.Fatal("outcome index not rebuilt")
	}
	if ws, _ := target.WaitingRuns(ctx, 10); len(ws) != 1 || ws[0].Run != w.E {
		t.Fatalf("waiting index not rebuilt: %v", ws)
	}
	// The restored journal exports to the same runs and log.
	exp2 := export(t, target)
	if !bytes.Equal(exp[bytes.IndexByte(exp, '\n'):], exp2[bytes.IndexByte(exp2, '\n'):]) {
		t.Fatal("the restored journal's export differs beyond its header")
	}
}

// staleCheckpoint answers Checkpoint with a saved one, as if runs were
// sealed between the export's checkpoint and its reading of them.
type staleCheckpoint struct {
	store.Journal
	cp store.Checkpoint
}

func (s staleCheckpoint) Checkpoint(context.Context) (store.Checkpoint, error) { return s.cp, nil }

func TestExportIsAtItsCheckpoint(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	appendAll(t, w.j, 3, conclude(w.C, "succeeded"))
	before, _ := w.j.Checkpoint(ctx)
	seal(t, w.j, w.C, 3, "succeeded") // leaf 3, beyond the export's checkpoint
	exp := export(t, staleCheckpoint{w.j, before})
	if !bytes.Contains(exp, []byte(`"run":"`+w.C.String()+`","unsealed":true`)) {
		t.Fatal("a run sealed after the export's checkpoint is not exported unsealed")
	}
	target := openJournal(t, testOrigin)
	rep, err := Restore(ctx, target, bytes.NewReader(exp))
	if err != nil {
		t.Fatal(err)
	}
	if rep.ConcludedUnsealed != 1 || rep.Sealed != 3 || rep.OriginChanged || rep.Rebuilt != before {
		t.Fatalf("report %+v", rep)
	}
	// Sealing it in the restored journal, as in the original, gives the
	// same log.
	seal(t, target, w.C, 3, "succeeded")
	a, _ := w.j.Checkpoint(ctx)
	b, _ := target.Checkpoint(ctx)
	if a != b {
		t.Fatalf("after sealing C in both: %+v vs %+v", a, b)
	}
}

type sealingJournal struct{ store.Journal }

func (sealingJournal) Seals() bool { return true }

func TestRestoreRefuses(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	refused := func(name string, j store.Journal, in []byte, check func(error) bool) {
		t.Helper()
		_, err := Restore(ctx, j, bytes.NewReader(in))
		var rr *RestoreRefusedError
		if !errors.As(err, &rr) || (check != nil && !check(err)) {
			t.Errorf("%s: %v", name, err)
			return
		}
		// Nothing was written.
		if runs, _ := j.RunsByID(ctx, nil, 10); len(runs) != 0 && name != "target holds a run" && name != "target's log not empty" && name != "admission key held" {
			t.Errorf("%s: the target holds %d runs after a refusal", name, len(runs))
		}
	}
	isCut := func(err error) bool { var c *CutError; return errors.As(err, &c) }
	isFormat := func(err error) bool { var f *FormatError; return errors.As(err, &f) }
	isUnknown := func(err error) bool { var u *UnknownFormatError; return errors.As(err, &u) }

	ls := lines(exp)
	refused("cut at the trailer", openJournal(t, testOrigin), join(ls[:len(ls)-1]), isCut)
	refused("cut mid-line", openJournal(t, testOrigin), exp[:len(exp)-10], isCut)
	refused("empty", openJournal(t, testOrigin), nil, isCut)
	refused("newer version", openJournal(t, testOrigin), bytes.Replace(exp, []byte(`"version":1`), []byte(`"version":2`), 1), isUnknown)
	refused("a package", openJournal(t, testOrigin), w.pkg(t, Selection{Runs: []store.RunID{w.A}}), func(err error) bool { return errors.Is(err, ErrNotAnExport) })
	refused("changed record", openJournal(t, testOrigin), bytes.Replace(exp, []byte(`"text":"b"`), []byte(`"text":"B"`), 1), isFormat)
	refused("dropped run block", openJournal(t, testOrigin), join(append(append([][]byte{}, ls[:1]...), ls[2:]...)), isFormat)
	refused("seals", sealingJournal{openJournal(t, testOrigin)}, exp, nil)

	holds := openJournal(t, testOrigin)
	appendAll(t, holds, 1, noteRec(w.C, store.CaseID{}, "mine"))
	refused("target holds a run", holds, exp, nil)

	logged := openJournal(t, testOrigin)
	other := runID(0x55)
	appendAll(t, logged, 1, conclude(other, "succeeded"))
	seal(t, logged, other, 1, "succeeded")
	refused("target's log not empty", logged, exp, nil)

	keyed := openJournal(t, testOrigin)
	appendAll(t, keyed, 1, store.Append{Run: runID(0x56), Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"order-A"}`)})
	refused("admission key held", keyed, exp, nil)
}

type memRegister struct {
	acts []store.Disclosure
	fail error
}

func (m *memRegister) RecordDisclosure(_ context.Context, d store.Disclosure) error {
	if m.fail != nil {
		return m.fail
	}
	if err := d.Validate(); err != nil {
		return err
	}
	m.acts = append(m.acts, d)
	return nil
}

func (m *memRegister) Disclosures(context.Context, string, int) ([]store.Disclosure, error) {
	return m.acts, nil
}

func TestDisclose(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "pkg.jsonl")
	by := store.Operator{Actor: "alice", Basis: store.Authenticated}
	req := Request{Selection: Selection{Runs: []store.RunID{w.A}, Cases: []store.CaseID{w.X}}, Checkpoint: w.signed(t),
		Recipient: "auditor@example.com", By: by, Key: w.k.discSigner, Now: func() time.Time { return time.Unix(1767225600, 0) }}

	// The act is recorded in the journal's own register (store/sqlite).
	act, err := Disclose(ctx, w.j, w.j, dest, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o600 {
		t.Errorf("package mode %v", fi.Mode().Perm())
	}
	if act.Package != store.Sum(b) || act.Bytes != int64(len(b)) || act.Carried != 2 || act.Sealed != 2 || !strings.HasPrefix(act.ID, "dsc_") {
		t.Fatalf("act %+v", act)
	}
	mustSound(t, verifyBytes(t, b, w.k.options()))
	acts, err := w.j.Disclosures(ctx, "", 10)
	if err != nil || len(acts) != 1 || acts[0].ID != act.ID || acts[0].Package != act.Package || acts[0].Recipient != req.Recipient {
		t.Fatalf("register %+v %v", acts, err)
	}
	// The register records which key signed the statement: the disclosure
	// key, not the log key.
	wantKey := fmt.Sprintf("%s+%08x", w.k.discSigner.Name(), w.k.discSigner.KeyHash())
	if acts[0].SignedBy != wantKey || act.SignedBy != wantKey {
		t.Fatalf("register signed_by %q (act %q), want %q", acts[0].SignedBy, act.SignedBy, wantKey)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("staging left behind: %v", ents)
	}

	// A disclosure never replaces a file.
	if _, err := Disclose(ctx, w.j, w.j, dest, req); err == nil {
		t.Fatal("disclosed over an existing file")
	}
	// No destination directory, no disclosure.
	if _, err := Disclose(ctx, w.j, w.j, filepath.Join(dir, "missing", "p.jsonl"), req); err == nil {
		t.Fatal("disclosed into a missing directory")
	}
	// A register that fails: nothing is delivered, nothing left behind.
	reg := &memRegister{fail: errors.New("register down")}
	dest2 := filepath.Join(dir, "pkg2.jsonl")
	if _, err := Disclose(ctx, w.j, reg, dest2, req); err == nil {
		t.Fatal("disclosed without recording")
	}
	if _, err := os.Stat(dest2); err == nil {
		t.Fatal("package delivered although the act was not recorded")
	}
	// A package that cannot be written: nothing recorded, nothing left.
	reg = &memRegister{}
	bad := req
	bad.Selection = Selection{Runs: []store.RunID{runID(0x77)}}
	if _, err := Disclose(ctx, w.j, reg, dest2, bad); err == nil || len(reg.acts) != 0 {
		t.Fatalf("unknown run disclosed: %v %v", err, reg.acts)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("files left behind: %v", ents)
	}
	// Bad requests.
	bad = req
	bad.Recipient = ""
	if _, err := Disclose(ctx, w.j, reg, dest2, bad); err == nil {
		t.Fatal("blank recipient accepted")
	}
	bad = req
	bad.By = store.Operator{}
	if _, err := Disclose(ctx, w.j, reg, dest2, bad); err == nil {
		t.Fatal("blank operator accepted")
	}
}
