package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
)

// witnessed signs the journal's current checkpoint with "journal checkpoint"
// and adds two witnesses' cosignatures, as a publisher would; it returns
// the note's path and the witness key flags.
func witnessed(t *testing.T, db string) (string, []string) {
	t.Helper()
	n := mustCLI(t, db, "", "checkpoint")
	dir := t.TempDir()
	var flags []string
	var signers []note.Signer
	for _, name := range []string{"w1.example", "w2.example"} {
		skey, vkey, err := checkpoint.GenerateCosignerKey(rand.Reader, name)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := checkpoint.NewCosigner(skey)
		signers = append(signers, c)
		p := filepath.Join(dir, name+".vkey")
		os.WriteFile(p, []byte(vkey), 0o644)
		flags = append(flags, "--witness", "@"+p)
	}
	body := n[:strings.Index(n, "\n\n")+1]
	cp, err := checkpoint.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := checkpoint.SignatureLines(cp, signers...)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "witnessed.note")
	os.WriteFile(p, append([]byte(n), lines...), 0o644)
	return p, flags
}

func TestDiscloseExportRestore(t *testing.T) {
	db := newJournal(t)
	a, b, c := store.NewRunID(), store.NewRunID(), store.NewRunID()
	cs := store.NewCaseID()
	mustCLI(t, db, line(a, "Note", `"text":"a"`)+line(a, "RunConcluded", `"outcome":"succeeded"`)+
		line(b, "Note", `"case":"`+cs.String()+`","text":"b"`)+line(b, "RunConcluded", `"outcome":"quarantined"`)+
		line(c, "Note", `"text":"c, still open"`), "append", "--epoch", "1")
	mustCLI(t, db, "", "seal", a.String(), "--epoch", "1", "--outcome", "succeeded")
	mustCLI(t, db, "", "seal", b.String(), "--epoch", "1", "--outcome", "quarantined")
	notePath, wflags := witnessed(t, db)
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg.jsonl")

	args := append([]string{"disclose", "--runs", a.String() + "," + c.String(), "--cases", cs.String(),
		"--recipient", "auditor@example.com", "--out", pkg, "--checkpoint", notePath, "--by", "alice", "--json"}, wflags...)
	var act store.Disclosure
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", args...)), &act); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(pkg)
	if err != nil {
		t.Fatal(err)
	}
	if act.Package != store.Sum(raw) || act.Carried != 3 || act.Sealed != 2 || act.By.Actor != "alice" {
		t.Fatalf("act %+v", act)
	}
	// The package verifies with the journal's log key and the witnesses.
	vkey := strings.TrimSpace(mustCLI(t, db, "", "key"))
	lv, _ := checkpoint.NewVerifier(vkey)
	var ws []*checkpoint.CosignatureVerifier
	for i := 1; i < len(wflags); i += 2 {
		k, _ := os.ReadFile(wflags[i][1:])
		w, _ := checkpoint.NewCosignatureVerifier(string(k))
		ws = append(ws, w)
	}
	pol, _ := checkpoint.NewThresholdPolicy(2, ws...)
	// The statement is signed by the journal's disclosure key, which
	// journal key --disclosure publishes, and which is not the log key.
	dvkey := strings.TrimSpace(mustCLI(t, db, "", "key", "--disclosure"))
	if dvkey == vkey || disclosure.SameKeyMaterial(dvkey, vkey) || !strings.HasPrefix(dvkey, act.Checkpoint.Origin+disclosure.DisclosureKeySuffix+"+") {
		t.Fatalf("disclosure key %q, log key %q", dvkey, vkey)
	}
	if fi, err := os.Stat(db + ".disclosure.key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("disclosure key file: %v %v", fi, err)
	}
	if strings.Contains(mustCLI(t, db, "", "key", "--disclosure", "--json"), "PRIVATE") {
		t.Fatal("the private disclosure key was printed")
	}
	dv, _ := checkpoint.NewVerifier(dvkey)
	rep, err := disclosure.Verify(context.Background(), bytes.NewReader(raw), disclosure.Options{Logs: []note.Verifier{lv}, Policy: pol, Disclosure: []note.Verifier{dv}})
	if err != nil || rep.Verdict != disclosure.Sound || rep.Statement == nil || rep.Statement.Recipient != "auditor@example.com" {
		t.Fatalf("package: %v %+v", err, rep)
	}
	// Issue 11 item 6 / issue 18 item 7: --log-key K with --policy P whose
	// log line is K is one key, not a usage error.
	full := filepath.Join(dir, "full.policy")
	os.WriteFile(full, []byte("log "+vkey+"\nquorum none\n"), 0o644)
	mustCLI(t, db, "", "disclose", "--runs", a.String(), "--recipient", "r", "--out", filepath.Join(dir, "twice"), "--log-key", vkey, "--policy", full)
	// The act is in the register.
	out := mustCLI(t, db, "", "disclosures", "--json")
	if !strings.Contains(out, act.ID) || !strings.Contains(out, act.Package.String()) {
		t.Fatalf("register: %s", out)
	}
	expect(t, cli(t, db, "", "disclosures"), exitOK, act.ID, "auditor@example.com", act.Package.String())

	// Refusals.
	expect(t, cli(t, db, "", append([]string{"disclose", "--runs", a.String(), "--recipient", "r", "--out", pkg, "--checkpoint", notePath}, wflags...)...),
		exitFailure, "never replaces")
	expect(t, cli(t, db, "", "disclose", "--runs", a.String(), "--recipient", "r", "--out", filepath.Join(dir, "p2"), "--checkpoint", notePath),
		exitUsage, "witness policy")
	expect(t, cli(t, db, "", append([]string{"disclose", "--recipient", "r", "--out", filepath.Join(dir, "p2")}, wflags...)...),
		exitUsage, "at least one run")
	expect(t, cli(t, db, "", append([]string{"disclose", "--runs", store.NewRunID().String(), "--recipient", "r", "--out", filepath.Join(dir, "p2"), "--checkpoint", notePath}, wflags...)...),
		exitFailure, "not in the journal")
	// The kept checkpoint carries no cosignature: it fails the policy,
	// unless the policy deliberately needs none.
	expect(t, cli(t, db, "", append([]string{"disclose", "--runs", a.String(), "--recipient", "r", "--out", filepath.Join(dir, "p2")}, wflags...)...),
		exitFailure, "witness policy")
	none := filepath.Join(dir, "none.policy")
	os.WriteFile(none, []byte("quorum none\n"), 0o644)
	mustCLI(t, db, "", "disclose", "--runs", a.String(), "--recipient", "r", "--out", filepath.Join(dir, "p3"), "--policy", none)
	// A run sealed after the checkpoint needs a newer one.
	mustCLI(t, db, line(c, "RunConcluded", `"outcome":"succeeded"`), "append", "--epoch", "1")
	mustCLI(t, db, "", "seal", c.String(), "--epoch", "1", "--outcome", "succeeded")
	expect(t, cli(t, db, "", append([]string{"disclose", "--runs", c.String(), "--recipient", "r", "--out", filepath.Join(dir, "p4"), "--checkpoint", notePath}, wflags...)...),
		exitFailure, "newer checkpoint")
	if _, err := os.Stat(filepath.Join(dir, "p4")); err == nil {
		t.Fatal("a refused disclosure left its file")
	}

	// Export, then restore into a new journal: the same log.
	exp := filepath.Join(dir, "export.jsonl")
	expect(t, cli(t, db, "", "export", "--out", exp), exitOK, "exported 3 runs (3 sealed)")
	expect(t, cli(t, db, "", "export", "--out", exp), exitFailure, "never replaces")
	target := filepath.Join(t.TempDir(), "restored.db")
	mustCLI(t, target, "", "init", "--origin", "example.com/restored")
	expect(t, cli(t, target, "", "restore", exp), exitOK, "restored 3 runs (3 sealed), 6 records", "origin is now")
	var src, dst struct {
		Size uint64 `json:"size"`
		Root string `json:"root"`
	}
	json.Unmarshal([]byte(mustCLI(t, db, "", "checkpoint", "--json")), &src)
	json.Unmarshal([]byte(mustCLI(t, target, "", "checkpoint", "--json")), &dst)
	if src.Size != dst.Size || src.Root != dst.Root || src.Size != 3 {
		t.Fatalf("source log %+v, restored %+v", src, dst)
	}
	// Restoring again is refused: the target holds the runs.
	expect(t, cli(t, target, "", "restore", exp), exitFailure, "refused, nothing written")
	// The register is not exported.
	if out := mustCLI(t, target, "", "disclosures"); out != "" {
		t.Fatalf("restored register: %q", out)
	}
	// A package is not an export.
	expect(t, cli(t, filepath.Join(t.TempDir(), "x.db"), "", "restore", pkg), exitFailure, "no journal")
	empty := newJournal(t)
	expect(t, cli(t, empty, "", "restore", pkg), exitFailure, "not a whole export")
	// Export to stdout.
	r := cli(t, db, "", "export", "--out", "-")
	if r.code != 0 || !strings.HasPrefix(r.stdout, `{"canon":1,`) || !strings.Contains(r.stderr, "exported 3 runs") {
		t.Fatalf("export to stdout: %+v", r)
	}
}
