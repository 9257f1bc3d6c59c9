package disclosure

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

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
// package vector with, what a verifier must report for it, and changes to it
// with the verdict each must get.
type vectorFile struct {
	Comment      string   `json:"comment"`
	LogKey       string   `json:"log_key"`
	WitnessKeys  []string `json:"witness_keys"`
	Quorum       int      `json:"quorum"`
	Package      expected `json:"package"`
	Export       expected `json:"export"`
	Tampered     []change `json:"tampered"`
	Restored     string   `json:"restored_root"`
	RestoredSize uint64   `json:"restored_size"`
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

// change replaces the first occurrence of From by To on line Line (1-based)
// of the package vector, or deletes the line when Delete is set.
type change struct {
	Name    string `json:"name"`
	Line    int    `json:"line"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Delete  bool   `json:"delete,omitempty"`
	Verdict string `json:"verdict"`
	Check   string `json:"check,omitempty"` // the finding's check, for not_sound
}

func (c change) apply(t testing.TB, pkg []byte) []byte {
	ls := lines(pkg)
	i := c.Line - 1
	if c.Delete {
		return join(append(append([][]byte{}, ls[:i]...), ls[i+1:]...))
	}
	if !bytes.Contains(ls[i], []byte(c.From)) {
		t.Fatalf("%s: line %d has no %q", c.Name, c.Line, c.From)
	}
	ls[i] = bytes.Replace(ls[i], []byte(c.From), []byte(c.To), 1)
	return join(ls)
}

func vectorChanges(w *world) []change {
	return []change{
		{Name: "a record's text changed", Line: 3, From: `"shop"`, To: `"shoq"`, Verdict: "not_sound", Check: CheckRecordHash},
		{Name: "a record deleted", Line: 4, Delete: true, Verdict: "not_sound", Check: CheckChain},
		{Name: "the seal changed", Line: 2, From: `"seal":"0`, To: `"seal":"1`, Verdict: "not_sound", Check: CheckSeal},
		{Name: "a proof hash changed", Line: 2, From: `"proof":["b`, To: `"proof":["c`, Verdict: "not_sound", Check: CheckInclusion},
		{Name: "the log index changed", Line: 2, From: `"index":2`, To: `"index":1`, Verdict: "not_sound", Check: CheckInclusion},
		{Name: "a sealed run marked unsealed", Line: 8, From: `{"index":0,`, To: `{`, Verdict: "not_sound", Check: CheckFraming},
		{Name: "the trailer's record count changed", Line: 17, From: `"records":11`, To: `"records":10`, Verdict: "not_sound", Check: CheckTrailer},
		{Name: "the trailer dropped", Line: 17, Delete: true, Verdict: "unverifiable"},
		{Name: "the checkpoint size in the header changed", Line: 1, From: `"size":3`, To: `"size":4`, Verdict: "not_sound", Check: CheckCheckpoint},
		{Name: "a carried run removed from the selection", Line: 1, From: `,"` + w.C.String() + `"]`, To: `]`, Verdict: "not_sound", Check: CheckSelection},
		{Name: "a newer version", Line: 1, From: `"version":1`, To: `"version":2`, Verdict: "unverifiable"},
	}
}

func vectorKeys(t testing.TB, vf *vectorFile) Options {
	t.Helper()
	lv, err := checkpoint.NewVerifier(vf.LogKey)
	if err != nil {
		t.Fatal(err)
	}
	var ws []*checkpoint.CosignatureVerifier
	for _, k := range vf.WitnessKeys {
		v, err := checkpoint.NewCosignatureVerifier(k)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, v)
	}
	p, err := checkpoint.NewThresholdPolicy(vf.Quorum, ws...)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Logs: []note.Verifier{lv}, Policy: p}
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
	vf := vectorFile{
		Comment: "Disclosure package and export vectors; see spec/disclosure.md. disclosure-package.jsonl must verify sound " +
			"with log_key and witness_keys at quorum; each tampered change must get its verdict; disclosure-export.jsonl must restore " +
			"to a log of restored_size leaves with root restored_root. Regenerate with: go test ./disclosure -run TestVectorsReproduce -update-vectors",
		LogKey: w.k.logVKey, WitnessKeys: w.k.witVKeys, Quorum: 2,
		Package: expected{File: "disclosure-package.jsonl", SHA256: prep.SHA256, Verdict: string(Sound),
			Runs: prep.Counts.Runs, Sealed: prep.Counts.Sealed, Records: prep.Counts.Records, Cases: prep.Counts.Cases},
		Export:   expected{File: "disclosure-export.jsonl", SHA256: store.Sum(exp).String(), Runs: 5, Sealed: 3, Records: 16},
		Tampered: vectorChanges(w), Restored: cp.Root.String(), RestoredSize: cp.Size,
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
}
