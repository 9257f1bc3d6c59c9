package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// TestMain lets the test binary stand in for the auditor binary in the
// child processes bench starts.
func TestMain(m *testing.M) {
	if os.Getenv("AUDITOR_TEST_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// cli runs the auditor in-process and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

const origin = "example.com/log"

// env is a journal with keys, and files holding the verifier keys.
type env struct {
	t         *testing.T
	dir       string
	j         *sqlite.Store
	logSigner note.Signer
	logV      note.Verifier
	cosigners []*checkpoint.Cosigner
	policy    *checkpoint.Policy
	disc      note.Signer // the journal's disclosure key
	trust     []string    // CLI flags for the keys
	n         int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	j, err := sqlite.Open(context.Background(), filepath.Join(e.dir, "j.db"), sqlite.Options{Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	e.j = j
	skey, vkey, err := checkpoint.GenerateLogKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	e.logSigner, _ = checkpoint.NewSigner(skey)
	e.logV, _ = checkpoint.NewVerifier(vkey)
	e.write("log.vkey", vkey)
	e.trust = []string{"--log-key", "@" + filepath.Join(e.dir, "log.vkey")}
	var ws []*checkpoint.CosignatureVerifier
	for i := 1; i <= 2; i++ {
		csk, cvk, err := checkpoint.GenerateCosignerKey(rand.Reader, fmt.Sprintf("w%d.example", i))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := checkpoint.NewCosigner(csk)
		e.cosigners = append(e.cosigners, c)
		ws = append(ws, c.Verifier())
		name := fmt.Sprintf("w%d.vkey", i)
		e.write(name, cvk)
		e.trust = append(e.trust, "--witness", "@"+filepath.Join(e.dir, name))
	}
	e.policy, _ = checkpoint.NewThresholdPolicy(2, ws...)
	dsk, dvk, err := checkpoint.GenerateLogKey(rand.Reader, origin+disclosure.DisclosureKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	e.disc, _ = checkpoint.NewSigner(dsk)
	e.write("disclosure.vkey", dvk)
	return e
}

func (e *env) write(name, content string) string {
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// fullPolicy writes the policy an operator hands over: its log line is the
// log key, then both witnesses, both needed.
func (e *env) fullPolicy() string {
	var ks []string
	for _, n := range []string{"log.vkey", "w1.vkey", "w2.vkey"} {
		b, err := os.ReadFile(filepath.Join(e.dir, n))
		if err != nil {
			e.t.Fatal(err)
		}
		ks = append(ks, strings.TrimSpace(string(b)))
	}
	return e.write("full.policy", fmt.Sprintf("log %s\nwitness w1 %s\nwitness w2 %s\ngroup both 2 w1 w2\nquorum both\n", ks[0], ks[1], ks[2]))
}

// args appends the trust flags; verify also gets the disclosure key.
func (e *env) args(extra ...string) []string {
	out := append(extra, e.trust...)
	if len(extra) > 0 && extra[0] == "verify" {
		out = append(out, "--disclosure-key", "@"+filepath.Join(e.dir, "disclosure.vkey"))
	}
	return out
}

// addRun appends a run of a few records and seals it unless open.
func (e *env) addRun(open bool) store.RunID {
	e.t.Helper()
	ctx := context.Background()
	e.n++
	run := store.NewRunID()
	batch := []store.Append{
		{Run: run, Kind: "Note", Fields: []byte(fmt.Sprintf(`{"text":"run %d"}`, e.n))},
		{Run: run, Kind: "Note", Fields: []byte(`{"text":"more"}`)},
	}
	if !open {
		batch = append(batch, store.Append{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)})
	}
	if _, err := e.j.Append(ctx, 1, batch); err != nil {
		e.t.Fatal(err)
	}
	if !open {
		if _, err := e.j.Seal(ctx, run, 1, "succeeded"); err != nil {
			e.t.Fatal(err)
		}
	}
	return run
}

// note signs the journal's current checkpoint with the log and the given
// number of witnesses.
func (e *env) note(witnesses int) []byte {
	e.t.Helper()
	cp, err := e.j.Checkpoint(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return e.signNote(cp, witnesses)
}

func (e *env) signNote(cp store.Checkpoint, witnesses int) []byte {
	e.t.Helper()
	signers := []note.Signer{e.logSigner}
	for _, c := range e.cosigners[:witnesses] {
		signers = append(signers, c.At(time.Unix(1767225600, 0)))
	}
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: cp.Root}, signers...)
	if err != nil {
		e.t.Fatal(err)
	}
	return msg
}

func (e *env) signed() *checkpoint.Signed {
	e.t.Helper()
	s, err := e.policy.Verify(e.note(2), e.logV)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// pkg writes a package of runs to a file and returns its path.
func (e *env) pkg(name string, runs ...store.RunID) string {
	e.t.Helper()
	var buf bytes.Buffer
	if _, err := disclosure.WritePackage(context.Background(), e.j, &buf, disclosure.Selection{Runs: runs}, e.signed(),
		disclosure.Signing{Recipient: "auditor@example.com", Key: e.disc}); err != nil {
		e.t.Fatal(err)
	}
	return e.write(name, buf.String())
}

// fakeServe serves the endpoints of spec/http.md section 3 from a journal,
// the way journal serve must: the latest witnessed checkpoint and
// consistency proofs as JSON, for one tenant.
type fakeServe struct {
	mu       sync.Mutex
	e        *env
	j        store.Journal
	override []byte // served instead of a fresh checkpoint when set
	fail     bool   // answer 500
	badProof bool   // corrupt consistency proofs
}

func (f *fakeServe) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/checkpoint/witnessed", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("tenant") != "acme" {
			http.Error(w, "unknown tenant", http.StatusNotFound)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fail {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		n := f.override
		if n == nil {
			cp, err := f.j.Checkpoint(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			n = f.e.signNote(cp, 2)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(n)
	})
	mux.HandleFunc("GET /v1/checkpoint/{size}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		size, err := strconv.ParseUint(r.PathValue("size"), 10, 64)
		if err != nil {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		cp, err := f.j.(store.CheckpointStore).CheckpointAt(r.Context(), size)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(f.e.signNote(cp, 0))
	})
	mux.HandleFunc("GET /v1/proof/consistency", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		oldSize, err1 := strconv.ParseUint(r.URL.Query().Get("old"), 10, 64)
		newSize, err2 := strconv.ParseUint(r.URL.Query().Get("new"), 10, 64)
		if err1 != nil || err2 != nil {
			http.Error(w, "bad sizes", http.StatusBadRequest)
			return
		}
		p, err := f.j.ConsistencyProof(r.Context(), oldSize, newSize)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ps := []string{}
		for i, d := range p {
			if f.badProof && i == 0 {
				d[0] ^= 1
			}
			ps = append(ps, base64.StdEncoding.EncodeToString(d[:]))
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"old_size": oldSize, "new_size": newSize, "proof": ps})
	})
	return mux
}

// serve starts a fake journal serve for tenant "acme"; the URL it returns
// carries the tenant, as an operator would give it to the monitor.
func (e *env) serve(j store.Journal) (*fakeServe, string) {
	f := &fakeServe{e: e, j: j}
	srv := httptest.NewServer(f.handler())
	e.t.Cleanup(srv.Close)
	return f, srv.URL + "/?tenant=acme"
}
