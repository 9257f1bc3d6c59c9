package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

type proofOut struct {
	Index      uint64   `json:"index"`
	Size       uint64   `json:"size"`
	Leaf       string   `json:"leaf"`
	OldSize    uint64   `json:"old_size"`
	NewSize    uint64   `json:"new_size"`
	OldRoot    string   `json:"old_root"`
	Proof      []string `json:"proof"`
	Checkpoint struct {
		Origin, Root, Note string
		Size               uint64
	} `json:"checkpoint"`
}

func hash32(t *testing.T, s string) log.Hash {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("hash %q: %v", s, err)
	}
	return log.Hash(b)
}

func hashes(t *testing.T, ss []string) []log.Hash {
	out := make([]log.Hash, len(ss))
	for i, s := range ss {
		out[i] = hash32(t, s)
	}
	return out
}

func sealRun(t *testing.T, db string) store.RunID {
	t.Helper()
	run := store.NewRunID()
	mustCLI(t, db, line(run, "RunAdmitted", "")+"\n"+line(run, "RunConcluded", `"outcome":"succeeded"`)+"\n", "append", "--epoch", "1")
	mustCLI(t, db, "", "seal", run.String(), "--epoch", "1", "--outcome", "succeeded")
	return run
}

func TestKeyCheckpointAndProofs(t *testing.T) {
	db := newJournal(t)
	fi, err := os.Stat(db + ".key")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v mode %v, want 0600", err, fi.Mode().Perm())
	}
	vkey := strings.TrimSpace(mustCLI(t, db, "", "key"))
	if strings.Contains(vkey, "PRIVATE") {
		t.Fatal("journal key printed the private key")
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatalf("key is not a note verifier key: %v", err)
	}
	runs := []store.RunID{sealRun(t, db), sealRun(t, db)}
	first := mustCLI(t, db, "", "checkpoint")
	n, err := note.Open([]byte(first), note.VerifierList(v))
	if err != nil {
		t.Fatalf("the signed checkpoint does not open with x/mod note: %v\n%s", err, first)
	}
	if !strings.HasSuffix(n.Text, "\n") || !strings.Contains(n.Text, "\n2\n") {
		t.Fatalf("checkpoint body %q, want size 2", n.Text)
	}
	if again := mustCLI(t, db, "", "checkpoint"); again != first {
		t.Errorf("re-signing the same size published a second note")
	}
	runs = append(runs, sealRun(t, db))
	mustCLI(t, db, "", "checkpoint")

	var inc proofOut
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "proof", "inclusion", runs[1].String(), "--size", "2", "--json")), &inc); err != nil {
		t.Fatal(err)
	}
	if inc.Index != 1 || inc.Size != 2 || inc.Checkpoint.Size != 2 || inc.Checkpoint.Note != first {
		t.Fatalf("inclusion at size 2 = %+v", inc)
	}
	if err := log.VerifyInclusion(hash32(t, inc.Leaf), inc.Index, inc.Size, hashes(t, inc.Proof), hash32(t, inc.Checkpoint.Root)); err != nil {
		t.Fatalf("printed inclusion proof does not verify: %v", err)
	}
	var con proofOut
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "proof", "consistency", "1", "--json")), &con); err != nil {
		t.Fatal(err)
	}
	if con.NewSize != 3 || con.Checkpoint.Note == "" {
		t.Fatalf("consistency = %+v", con)
	}
	if err := log.VerifyConsistency(1, 3, hash32(t, con.OldRoot), hash32(t, con.Checkpoint.Root), hashes(t, con.Proof)); err != nil {
		t.Fatalf("printed consistency proof does not verify: %v", err)
	}
	expect(t, cli(t, db, "", "proof", "inclusion", runs[2].String()), exitOK, "leaf 2 of 3")

	open := store.NewRunID()
	mustCLI(t, db, line(open, "Note", "")+"\n", "append", "--epoch", "1")
	expect(t, cli(t, db, "", "proof", "inclusion", open.String()), exitFailure, "not sealed")
	expect(t, cli(t, db, "", "proof", "inclusion", runs[2].String(), "--size", "2"), exitFailure, "not sealed, or was sealed later")
	expect(t, cli(t, db, "", "proof", "inclusion", runs[0].String(), "--size", "9"), exitFailure, "beyond the log")
	expect(t, cli(t, db, "", "proof", "consistency", "2", "1"), exitFailure, "above the new size")
	expect(t, cli(t, db, "", "proof", "consistency", "x"), exitUsage, "not a non-negative integer")
	expect(t, cli(t, db, "", "proof"), exitUsage, "inclusion or consistency")

	if err := os.Chmod(db+".key", 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, cli(t, db, "", "checkpoint"), exitFailure, "readable by others")
	os.Remove(db + ".key")
	expect(t, cli(t, db, "", "checkpoint"), exitFailure, "log key")
}
