package disclosure

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite spec/vectors/disclosure*")

const (
	vecPackage = "../spec/vectors/disclosure-package.jsonl"
	vecExport  = "../spec/vectors/disclosure-export.jsonl"
	vecJSON    = "../spec/vectors/disclosure.json"
)

// vectorFile is spec/vectors/disclosure.json: the keys to verify the
// package vector with (and the private keys and times that made it, so
// that another implementation can rebuild it), what a verifier must report
// for it, and changes to it with the verdict each must get.
type vectorFile struct {
	Comment       string   `json:"comment"`
	LogKey        string   `json:"log_key"`
	WitnessKeys   []string `json:"witness_keys"`
	Policy        string   `json:"policy"`
	DisclosureKey string   `json:"disclosure_key"`
	Signing       signing  `json:"signing"`
	Package       expected `json:"package"`
	Export        expected `json:"export"`
	Tampered      []change `json:"tampered"`
	Restored      string   `json:"restored_root"`
	RestoredSize  uint64   `json:"restored_size"`
}

// signing is what made the package vector's signatures: Ed25519 signatures
// are deterministic, so these private keys, the cosignature time and the
// recipient reproduce the note and the statement byte for byte.
type signing struct {
	LogSKey        string   `json:"log_private_key"`
	WitnessSKeys   []string `json:"witness_private_keys"`
	DisclosureSKey string   `json:"disclosure_private_key"`
	CosignedAt     int64    `json:"cosigned_at"`
	Recipient      string   `json:"recipient"`
}

type expected struct {
	File    string `json:"file"`
	SHA256  string `json:"sha256"`
	Verdict string `json:"verdict,omitempty"`
	Runs    uint64 `json:"runs"`
	Sealed  uint64 `json:"sealed"`
	Records uint64 `json:"records"`
	Cases   uint64 `json:"cases,omitempty"`
}

// change is a tampering of the package vector: its edits, applied to the
// vector's lines as numbered in the original file (1-based), then the
// verdict and the first finding's check a verifier must report.
type change struct {
	Name    string `json:"name"`
	Edits   []edit `json:"edits"`
	Verdict string `json:"verdict"`
	Check   string `json:"check,omitempty"` // the first finding's check, for not_sound
}

// edit replaces the first occurrence of From in line Line by To, or, with
// Delete, removes the line. Deletions are applied after every replacement,
// so line numbers always refer to the original file.
type edit struct {
	Line   int    `json:"line"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Delete bool   `json:"delete,omitempty"`
}

func (c change) apply(t testing.TB, pkg []byte) []byte {
	ls := lines(pkg)
	del := map[int]bool{}
	for _, e := range c.Edits {
		i := e.Line - 1
		if e.Delete {
			del[i] = true
			continue
		}
		if !bytes.Contains(ls[i], []byte(e.From)) {
			t.Fatalf("%s: line %d has no %q", c.Name, e.Line, e.From)
		}
		ls[i] = bytes.Replace(ls[i], []byte(e.From), []byte(e.To), 1)
	}
	var out [][]byte
	for i, l := range ls {
		if !del[i] {
			out = append(out, l)
		}
	}
	return join(out)
}

func one(line int, from, to string) []edit { return []edit{{Line: line, From: from, To: to}} }

func vectorChanges(w *world, pkg []byte) []change {
	ls := lines(pkg)
	return []change{
		{Name: "a record's text changed", Edits: one(3, `"shop"`, `"shoq"`), Verdict: "not_sound", Check: CheckRecordHash},
		{Name: "a record deleted", Edits: []edit{{Line: 4, Delete: true}}, Verdict: "not_sound", Check: CheckChain},
		{Name: "the seal changed", Edits: one(2, `"seal":"0`, `"seal":"1`), Verdict: "not_sound", Check: CheckSeal},
		{Name: "a proof hash changed", Edits: one(2, `"proof":["b`, `"proof":["c`), Verdict: "not_sound", Check: CheckInclusion},
		{Name: "the log index changed", Edits: one(2, `"index":2`, `"index":1`), Verdict: "not_sound", Check: CheckInclusion},
		{Name: "a sealed run marked unsealed", Edits: one(8, `{"index":0,`, `{`), Verdict: "not_sound", Check: CheckFraming},
		{Name: "the trailer's record count changed", Edits: one(17, `"records":11`, `"records":10`), Verdict: "not_sound", Check: CheckTrailer},
		{Name: "the trailer dropped", Edits: []edit{{Line: 17, Delete: true}}, Verdict: "unverifiable"},
		{Name: "the checkpoint size in the header changed", Edits: one(1, `"size":3`, `"size":4`), Verdict: "not_sound", Check: CheckCheckpoint},
		{Name: "a carried run removed from the selection", Edits: one(1, `,"`+w.C.String()+`"]`, `]`), Verdict: "not_sound", Check: CheckSelection},
		{Name: "a newer version", Edits: one(1, `"version":1`, `"version":2`), Verdict: "unverifiable"},
		// Issue 11 item 2: run B is carried only because of case X. Dropping
		// its block and records and fixing every count leaves a consistent
		// file; only the signed statement tells.
		{Name: "a run carried for a case dropped, counts fixed", Edits: []edit{
			{Line: 8, Delete: true}, {Line: 9, Delete: true}, {Line: 10, Delete: true}, {Line: 11, Delete: true},
			{Line: 16, From: `"runs":2`, To: `"runs":1`},
			{Line: 17, From: `"records":11,"runs":3,"sealed":2`, To: `"records":8,"runs":2,"sealed":1`},
		}, Verdict: "not_sound", Check: CheckStatement},
		{Name: "the statement removed", Edits: one(17, statementRE.FindString(string(ls[16])), ``), Verdict: "not_sound", Check: CheckStatement},
		{Name: "the statement's recipient changed", Edits: one(17, `recipient `+testRecipient, `recipient someone@else.example`), Verdict: "not_sound", Check: CheckStatement},
	}
}

var statementRE = regexp.MustCompile(`,"statement":"[^"]*"`)

func vectorKeys(t testing.TB, vf *vectorFile) Options {
	t.Helper()
	p, err := checkpoint.ParsePolicy([]byte(vf.Policy))
	if err != nil {
		t.Fatal(err)
	}
	// log_key is also the policy's log line: given twice, it is one key.
	logs, err := MergeLogKeys([]string{vf.LogKey}, p)
	if err != nil {
		t.Fatal(err)
	}
	dv, err := checkpoint.NewVerifier(vf.DisclosureKey)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Logs: logs, Policy: p, Disclosure: []note.Verifier{dv}}
}

func loadVectors(t testing.TB) (*vectorFile, []byte, []byte) {
	t.Helper()
	b, err := os.ReadFile(vecJSON)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vf); err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(vecPackage)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := os.ReadFile(vecExport)
	if err != nil {
		t.Fatal(err)
	}
	return &vf, pkg, exp
}

// The vectors are made by this code from a fixed journal, fixed keys and a
// fixed time, so they are reproduced byte for byte; -update-vectors rewrites
// them after a deliberate format change.
func TestVectorsReproduce(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.C, w.A}, Cases: []store.CaseID{w.X}})
	exp := export(t, w.j)
	prep := verifyBytes(t, pkg, w.k.options())
	mustSound(t, prep)
	cp, _ := w.j.Checkpoint(ctx)
	policy := fmt.Sprintf("log %s\nwitness witness1.example %s\nwitness witness2.example %s\ngroup both 2 witness1.example witness2.example\nquorum both\n",
		w.k.logVKey, w.k.witVKeys[0], w.k.witVKeys[1])
	vf := vectorFile{
		Comment: "Disclosure package and export vectors; see spec/disclosure.md section 8. disclosure-package.jsonl must verify sound " +
			"with log_key, policy and disclosure_key; each tampered change must get its verdict and first check; disclosure-export.jsonl must restore " +
			"to a log of restored_size leaves with root restored_root. Regenerate with: go test ./disclosure -run TestVectorsReproduce -update-vectors",
		LogKey: w.k.logVKey, WitnessKeys: w.k.witVKeys, Policy: policy, DisclosureKey: w.k.discVKey,
		Signing: signing{LogSKey: w.k.logSKey, WitnessSKeys: w.k.witSKeys, DisclosureSKey: w.k.discSKey, CosignedAt: w.k.at.Unix(), Recipient: testRecipient},
		Package: expected{File: "disclosure-package.jsonl", SHA256: prep.SHA256, Verdict: string(Sound),
			Runs: prep.Counts.Runs, Sealed: prep.Counts.Sealed, Records: prep.Counts.Records, Cases: prep.Counts.Cases},
		Export:   expected{File: "disclosure-export.jsonl", SHA256: store.Sum(exp).String(), Runs: 5, Sealed: 3, Records: 16},
		Tampered: vectorChanges(w, pkg), Restored: cp.Root.String(), RestoredSize: cp.Size,
	}
	js, err := json.MarshalIndent(vf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	js = append(js, '\n')
	if *updateVectors {
		for p, b := range map[string][]byte{vecPackage: pkg, vecExport: exp, vecJSON: js} {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for p, b := range map[string][]byte{vecPackage: pkg, vecExport: exp, vecJSON: js} {
		have, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, b) {
			t.Errorf("%s differs from what this code writes; if the format changed on purpose, rerun with -update-vectors", p)
		}
	}
}

// The vectors verify, restore and fail as they say, read from the files
// alone, as another implementation would read them.
func TestVectors(t *testing.T) {
	vf, pkg, exp := loadVectors(t)
	opts := vectorKeys(t, vf)
	rep := verifyBytes(t, pkg, opts)
	mustSound(t, rep)
	if rep.SHA256 != vf.Package.SHA256 || rep.Counts.Runs != vf.Package.Runs || rep.Counts.Sealed != vf.Package.Sealed ||
		rep.Counts.Records != vf.Package.Records || rep.Counts.Cases != vf.Package.Cases {
		t.Fatalf("report %+v, vector %+v", rep, vf.Package)
	}
	for _, c := range vf.Tampered {
		rep := verifyBytes(t, c.apply(t, bytes.Clone(pkg)), opts)
		if string(rep.Verdict) != c.Verdict {
			t.Errorf("%s: verdict %s, want %s: %s", c.Name, rep.Verdict, c.Verdict, summary(rep))
			continue
		}
		if c.Check != "" && (len(rep.Findings) == 0 || rep.Findings[0].Check != c.Check) {
			t.Errorf("%s: first finding %s, want check %s", c.Name, summary(rep), c.Check)
		}
	}
	target := openJournal(t, "example.com/restored")
	rr, err := Restore(context.Background(), target, bytes.NewReader(exp))
	if err != nil {
		t.Fatal(err)
	}
	if rr.Rebuilt.Root.String() != vf.Restored || rr.Rebuilt.Size != vf.RestoredSize || rr.Runs != vf.Export.Runs || rr.Records != vf.Export.Records {
		t.Fatalf("restore %+v, vector %+v", rr, vf)
	}
	if !strings.HasPrefix(string(pkg), `{"canon":1,`) {
		t.Fatal("vector does not start with its header")
	}
	resignVectors(t, vf, pkg)
}

// The published private keys, time and recipient re-make the package
// vector's signed note and statement byte for byte, as another
// implementation would (Ed25519 signatures are deterministic).
func resignVectors(t *testing.T, vf *vectorFile, pkg []byte) {
	ls := lines(pkg)
	h, err := parseHeader(bytes.TrimSuffix(ls[0], []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	logS, err := checkpoint.NewSigner(vf.Signing.LogSKey)
	if err != nil {
		t.Fatal(err)
	}
	signers := []note.Signer{logS}
	for _, k := range vf.Signing.WitnessSKeys {
		c, err := checkpoint.NewCosigner(k)
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, c.At(time.Unix(vf.Signing.CosignedAt, 0)))
	}
	n, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: h.Checkpoint.Origin, Size: h.Checkpoint.Size, Root: h.Checkpoint.Root}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(n, h.Note) {
		t.Fatalf("the published keys sign the checkpoint as\n%s\nthe vector carries\n%s", n, h.Note)
	}
	tr, err := parseTrailer(bytes.TrimSuffix(ls[len(ls)-1], []byte("\n")), KindPackageEnd)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStatement([]byte(tr.Statement[:strings.Index(tr.Statement, "\n\n")+1]))
	if err != nil {
		t.Fatal(err)
	}
	if st.Recipient != vf.Signing.Recipient {
		t.Fatalf("statement recipient %q, vector %q", st.Recipient, vf.Signing.Recipient)
	}
	ds, err := checkpoint.NewSigner(vf.Signing.DisclosureSKey)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := SignStatement(st, ds)
	if err != nil {
		t.Fatal(err)
	}
	if string(signed) != tr.Statement {
		t.Fatalf("the published disclosure key signs the statement as\n%s\nthe vector carries\n%s", signed, tr.Statement)
	}
}
