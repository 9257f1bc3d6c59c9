package disclosure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/faulty"
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

// A reordered export that gives two runs one log leaf is refused naming
// both, before anything is written (the leaf slots are on disk now, not a
// sorted slice).
func TestRestore_TwoRunsClaimOneLeaf(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	re := regexp.MustCompile(`"index":[0-9]+`)
	idx := re.FindAllIndex(exp, -1)
	if len(idx) < 2 {
		t.Fatalf("%d sealed run blocks", len(idx))
	}
	first := exp[idx[0][0]:idx[0][1]]
	bad := slices.Concat(exp[:idx[1][0]], first, exp[idx[1][1]:])
	target := openJournal(t, testOrigin)
	_, err := Restore(ctx, target, bytes.NewReader(bad))
	var rr *RestoreRefusedError
	var fe *FormatError
	if !errors.As(err, &rr) || !errors.As(err, &fe) || !strings.Contains(err.Error(), "is claimed by runs") {
		t.Fatalf("two runs at one leaf: %v", err)
	}
	if runs, _ := target.RunsByID(ctx, nil, 10); len(runs) != 0 {
		t.Fatalf("the target holds %d runs after a refusal", len(runs))
	}
}

// An export whose runs chain correctly but claim one admission key twice
// (runs far apart in the file, so no window of recent keys would see it)
// is refused before anything is written.
func TestRestore_AdmissionKeyClaimedTwice(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "export.jsonl")
	const n = 300
	writeSynthExport(t, path, n, func(i int) string {
		if i == n-1 {
			i = 0
		}
		return fmt.Sprintf("order-%d", i)
	})
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	target := openJournal(t, testOrigin)
	_, err = Restore(ctx, target, f)
	var rr *RestoreRefusedError
	first, _ := synthRun(t, 0, synthKey)
	last, _ := synthRun(t, n-1, synthKey)
	if !errors.As(err, &rr) || !strings.Contains(err.Error(), first.String()) || !strings.Contains(err.Error(), last.String()) {
		t.Fatalf("one key, two runs: %v", err)
	}
	if runs, _ := target.RunsByID(ctx, nil, 10); len(runs) != 0 {
		t.Fatalf("the target holds %d runs after a refusal", len(runs))
	}
}

// The external sort of admission keys finds a duplicate across its merge
// levels: more keys than keyChunk*keyFanIn force a merge of spilled files
// before the final one.
func TestKeySpill_DuplicateAcrossMerges(t *testing.T) {
	total := keyChunk*keyFanIn + 3*keyChunk + 17
	for _, dup := range []bool{false, true} {
		k := &keySpill{}
		for i := range total {
			key := fmt.Sprint(i)
			if dup && i == total-1 {
				key = "0"
			}
			if err := k.add(store.Sum([]byte(key)), runID(byte(i))); err != nil {
				t.Fatal(err)
			}
		}
		if len(k.files) > keyFanIn {
			t.Fatalf("%d sorted files open", len(k.files))
		}
		d, a, b, found, err := k.duplicate()
		k.close()
		if err != nil {
			t.Fatal(err)
		}
		if found != dup || (dup && (d != store.Sum([]byte("0")) || a != runID(0) || b != runID(byte(total-1)))) {
			t.Fatalf("dup=%v: found %v %s %s %s", dup, found, d, a, b)
		}
	}
}

// stopAfter lets n appends or seals through and then fails every write, as
// a restore killed between two of its transactions leaves the target.
// stopAfter fails the write after the first n of j (Append and Seal,
// numbered alone, reads between them not counted), as a restore
// interrupted there.
func stopAfter(j store.Journal, n int) *faulty.Journal {
	return faulty.New(j, faulty.Options{Seed: uint64(n), Only: []string{"Append", "Seal"}, At: map[uint64]faulty.Fault{uint64(n) + 1: faulty.FailBeforeCommit}})
}

// Issue 17 item 5: a restore interrupted after any of its writes (within
// a run, between runs, between seals) is finished by a resumed restore of
// the same export, with no run duplicated: the rebuilt journal exports to
// the same runs and log. A plain restore of the partial target is refused
// and says to resume.
func TestRestore_ResumeAfterInterruption(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	want, _ := w.j.Checkpoint(ctx)
	for n := 0; ; n++ {
		target := openJournal(t, testOrigin)
		_, err := Restore(ctx, stopAfter(target, n), bytes.NewReader(exp))
		if err == nil {
			if n < 5 {
				t.Fatalf("the whole restore took %d writes", n)
			}
			break
		}
		var ie *faulty.InjectedError
		if !errors.As(err, &ie) || ie.Op != uint64(n)+1 {
			t.Fatalf("after %d writes: %v", n, err)
		}
		if n > 0 {
			_, err = Restore(ctx, target, bytes.NewReader(exp))
			var rr *RestoreRefusedError
			if !errors.As(err, &rr) || !strings.Contains(err.Error(), "resume it") {
				t.Fatalf("after %d writes, a plain restore of the partial target: %v", n, err)
			}
		}
		rep, err := RestoreWith(ctx, target, bytes.NewReader(exp), RestoreOptions{Resume: true})
		if err != nil {
			t.Fatalf("resume after %d writes: %v", n, err)
		}
		if !rep.Faithful() || rep.Rebuilt.Size != want.Size || rep.Runs != 5 || rep.Records != 16 || rep.Sealed != 3 || !rep.Resumed {
			t.Fatalf("resume after %d writes: report %+v", n, rep)
		}
		exp2 := export(t, target)
		if !bytes.Equal(exp[bytes.IndexByte(exp, '\n'):], exp2[bytes.IndexByte(exp2, '\n'):]) {
			t.Fatalf("resume after %d writes: the restored journal's export differs", n)
		}
		// Resuming a finished restore changes nothing.
		rep, err = RestoreWith(ctx, target, bytes.NewReader(exp), RestoreOptions{Resume: true})
		if err != nil || rep.ResumedRecords != 16 || rep.ResumedLeaves != 3 {
			t.Fatalf("resume of a finished restore: %+v %v", rep, err)
		}
	}
}

// Resume accepts only a prefix of the export's own history.
func TestRestore_ResumeRefusesOtherHistory(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	resume := func(name string, j store.Journal, want string) {
		t.Helper()
		_, err := RestoreWith(ctx, j, bytes.NewReader(exp), RestoreOptions{Resume: true})
		var rr *RestoreRefusedError
		if !errors.As(err, &rr) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	other := openJournal(t, testOrigin)
	appendAll(t, other, 1, noteRec(w.C, store.CaseID{}, "mine"))
	resume("a run with other records", other, "is not a partial restore of this export")

	logged := openJournal(t, testOrigin)
	x := runID(0x55)
	appendAll(t, logged, 1, conclude(x, "succeeded"))
	seal(t, logged, x, 1, "succeeded")
	resume("a log with another leaf", logged, "is not a partial restore of this export")

	keyed := openJournal(t, testOrigin)
	appendAll(t, keyed, 1, store.Append{Run: runID(0x56), Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"order-A"}`)})
	resume("a key held by another run", keyed, "already holds admission key")
}
