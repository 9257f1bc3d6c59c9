package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// TestSealedJournal_AppendReadEraseCLI walks an operator through a sealed
// journal: the first append with --keyring seals it, the stored bytes hold
// no caller data, read opens it, the journal then refuses to read or write
// without the key ring (naming the flag), verify works with no key, erase
// destroys the case's key and records the act, read shows the fields as
// erased, and erasing again or erasing an unknown case says so.
func TestSealedJournal_AppendReadEraseCLI(t *testing.T) {
	db := newJournal(t)
	ring := filepath.Join(t.TempDir(), "keys")
	run, c := store.NewRunID(), store.NewCaseID()
	in := `{"run":"` + run.String() + `","case":"` + c.String() + `","kind":"RunAdmitted","source":"api","applicant":"Ada Lovelace"}` + "\n" +
		`{"run":"` + run.String() + `","case":"` + c.String() + `","kind":"StepDone","output":{"score":7,"name":"Ada Lovelace"}}` + "\n"
	mustCLI(t, db, in, "append", "--epoch", "1", "--keyring", ring)

	raw := mustCLI(t, db, "", "read", run.String(), "--json", "--keyring", ring)
	if !strings.Contains(raw, `"opened":`) || !strings.Contains(raw, "Ada Lovelace") {
		t.Fatalf("read with the key ring does not open: %s", raw)
	}
	var rec struct {
		Raw    json.RawMessage `json:"raw"`
		Erased []string        `json:"erased"`
	}
	json.Unmarshal([]byte(strings.SplitN(raw, "\n", 2)[0]), &rec)
	if strings.Contains(string(rec.Raw), "Ada") || !strings.Contains(string(rec.Raw), `"sealed:`) {
		t.Fatalf("the stored bytes are not sealed: %s", rec.Raw)
	}

	// Without the key ring: refused at start, naming the flag.
	expect(t, cli(t, db, "", "read", run.String()), exitUsage, "--keyring")
	expect(t, cli(t, db, `{"run":"`+store.NewRunID().String()+`","kind":"Note","secret":"x"}`+"\n", "append", "--epoch", "1"), exitUsage, "--keyring")
	// ... and verify needs no key.
	expect(t, cli(t, db, "", "verify", "--all"), exitOK)

	expect(t, cli(t, db, "", "erase", "--case", c.String(), "--keyring", ring), exitUsage, "--reason")
	out := mustCLI(t, db, "", "erase", "--case", c.String(), "--reason", "GDPR request 4711", "--actor", "dpo@example.com", "--keyring", ring)
	if !strings.Contains(out, "erased scope default/case/"+c.String()) {
		t.Fatalf("erase said %q", out)
	}
	txt := mustCLI(t, db, "", "read", run.String(), "--keyring", ring)
	if strings.Contains(txt, "Ada") || !strings.Contains(txt, "erased: applicant") || !strings.Contains(txt, `"$erased"`) {
		t.Fatalf("read after erasure:\n%s", txt)
	}
	again := mustCLI(t, db, "", "erase", "--case", c.String(), "--reason", "again", "--keyring", ring)
	if !strings.Contains(again, "already erased") {
		t.Fatalf("second erase said %q", again)
	}
	expect(t, cli(t, db, "", "erase", "--case", store.NewCaseID().String(), "--reason", "x", "--keyring", ring), exitFailure, "unknown to this key ring")
	expect(t, cli(t, db, "", "verify", "--all"), exitOK)
}

// TestServeSealed: serve with --keyring seals what clients append over
// HTTP (the stored bytes hold no caller data), and a sealed journal served
// without --keyring is refused at start, naming the flag.
func TestServeSealed(t *testing.T) {
	db := newJournal(t)
	ring := filepath.Join(t.TempDir(), "keys")
	writer := createToken(t, db, "default", "writer")
	sv := startServe(t, db, "--keyring", ring)
	run := store.NewRunID()
	code, body := sv.do("POST", "/v1/append?epoch=1", writer,
		`{"run":"`+run.String()+`","kind":"Note","secret":"Ada Lovelace"}`+"\n")
	if code != 200 {
		t.Fatalf("append over HTTP: %d %s", code, body)
	}
	if sv.stop() != 0 {
		t.Fatal("serve did not stop cleanly")
	}
	s := openStore(t, db, nil)
	recs, err := s.Read(context.Background(), run, 1)
	s.Close()
	if err != nil || len(recs) != 1 || strings.Contains(string(recs[0].Raw), "Ada") || !strings.Contains(string(recs[0].Raw), `"sealed:`) {
		t.Fatalf("served append is not sealed: %v %v", recs, err)
	}
	r := cli(t, db, "", "serve", "--listen", "127.0.0.1:0")
	expect(t, r, exitUsage, "--keyring")
}

// TestServe_KeyringMissingScopesRefusesToStart stops issue 27's wrong
// key ring: serve --keyring with a ring that never held the journal's
// scopes (a mistyped path makes a new, empty ring) started, then answered
// 500 to every read that opened a sealed record. It must refuse to start,
// naming the tenant and the scopes missing; with the right ring it serves.
func TestServe_KeyringMissingScopesRefusesToStart(t *testing.T) {
	db := newJournal(t)
	ring := filepath.Join(t.TempDir(), "keys")
	run, c := store.NewRunID(), store.NewCaseID()
	mustCLI(t, db, `{"run":"`+run.String()+`","case":"`+c.String()+`","kind":"Note","secret":"Ada Lovelace"}`+"\n", "append", "--epoch", "1", "--keyring", ring)

	wrong := filepath.Join(t.TempDir(), "typo")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan string, 1)
	done := make(chan int, 1)
	var stderr syncBuf
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr, onServe: func(addr string) { started <- addr }}
	go func() {
		done <- runApp(ctx, a, []string{"--db", db, "serve", "--listen", "127.0.0.1:0", "--keyring", wrong})
	}()
	select {
	case <-started:
		cancel()
		<-done
		t.Fatalf("serve started with a key ring that lacks the journal's scopes:\n%s", stderr.String())
	case code := <-done:
		scope := "default/case/" + c.String()
		if code != exitUsage || !strings.Contains(stderr.String(), scope) || !strings.Contains(stderr.String(), "tenant default") {
			t.Errorf("serve with a key ring lacking scope %s: exit %d, want %d naming the tenant and the scope:\n%s", scope, code, exitUsage, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve neither started nor refused") // only against a hang
	}
	sv := startServe(t, db, "--keyring", ring)
	if sv.stop() != 0 {
		t.Fatal("serve with the journal's own key ring did not stop cleanly")
	}
}
