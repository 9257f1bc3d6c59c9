package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	flog "github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/witness"
)

// testWitness is a tlog-witness on a real 127.0.0.1 listener that can go
// down and come back on the same address.
type testWitness struct {
	t    *testing.T
	name string
	vkey string
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
}

func newTestWitness(t *testing.T, name, logOrigin, logVKey string) *testWitness {
	t.Helper()
	ctx := context.Background()
	k := journaltest.NewWitness(t, name)
	vkey, c := k.VKey, k.Cosigner
	st, err := witness.OpenStore(ctx, filepath.Join(t.TempDir(), "w.db"), witness.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.AddLog(ctx, witness.LogConfig{Origin: logOrigin, Keys: []string{logVKey}, QPD: witness.MaxQPD, Burst: witness.MaxQPD}); err != nil {
		t.Fatal(err)
	}
	w, err := witness.New(ctx, st, []*checkpoint.Cosigner{c}, witness.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := w.Handler("")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tw := &testWitness{t: t, name: name, vkey: vkey, addr: ln.Addr().String(), h: h}
	tw.serve(ln)
	t.Cleanup(tw.stop)
	return tw
}

func (tw *testWitness) serve(ln net.Listener) {
	srv := &http.Server{Handler: tw.h}
	tw.mu.Lock()
	tw.srv = srv
	tw.mu.Unlock()
	go srv.Serve(ln)
}

func (tw *testWitness) stop() {
	tw.mu.Lock()
	srv := tw.srv
	tw.srv = nil
	tw.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

func (tw *testWitness) start() {
	var err error
	for range 100 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", tw.addr); err == nil {
			tw.serve(ln)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tw.t.Fatalf("restart witness on %s: %v", tw.addr, err)
}

// serving is a 'journal serve' running in this process.
type serving struct {
	t      *testing.T
	base   string
	cancel context.CancelFunc
	done   chan int
	stderr *syncBuf
	tenant string // added to every request that names none
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startServe(t *testing.T, db string, args ...string) *serving {
	t.Helper()
	return startServeArgs(t, append([]string{"--db", db, "serve"}, args...)...)
}

// startServeArgs runs the CLI with args, which must include "serve", plus
// fast test timings, and waits until it listens.
func startServeArgs(t *testing.T, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	sv := &serving{t: t, cancel: cancel, done: make(chan int, 1), stderr: &syncBuf{}}
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: sv.stderr, onServe: func(s string) { addr <- s }}
	full := append([]string{"--log-level", "info"}, args...)
	full = append(full, "--listen", "127.0.0.1:0",
		"--checkpoint-interval", "100ms", "--checkpoint-every", "1", "--retry-min", "20ms", "--retry-max", "200ms", "--publish-poll", "50ms")
	go func() { sv.done <- runApp(ctx, a, full) }()
	select {
	case s := <-addr:
		sv.base = "http://" + s
	case code := <-sv.done:
		t.Fatalf("serve exited %d before listening:\n%s", code, sv.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", sv.stderr.String())
	}
	t.Cleanup(func() { sv.stop() })
	return sv
}

func (sv *serving) stop() int {
	if sv.cancel == nil {
		return 0
	}
	sv.cancel()
	sv.cancel = nil
	code := <-sv.done
	if code != 0 {
		sv.t.Errorf("serve exited %d:\n%s", code, sv.stderr.String())
	}
	return code
}

// do sends a request and returns the status and body.
func (sv *serving) do(method, path, token, body string) (int, string) {
	sv.t.Helper()
	if sv.tenant != "" && !strings.Contains(path, "tenant=") {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "tenant=" + sv.tenant
	}
	req, err := http.NewRequest(method, sv.base+path, strings.NewReader(body))
	if err != nil {
		sv.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		sv.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (sv *serving) must(method, path, token, body string) string {
	sv.t.Helper()
	code, b := sv.do(method, path, token, body)
	if code != http.StatusOK {
		sv.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	return b
}

// sealViaAPI admits, concludes and seals a fresh run through the API.
func (sv *serving) sealViaAPI(tok string) store.RunID {
	sv.t.Helper()
	run := store.NewRunID()
	var l store.Lease
	if err := json.Unmarshal([]byte(sv.must("POST", "/v1/runs/"+run.String()+"/lease", tok, `{"owner":"test","ttl_seconds":60}`)), &l); err != nil {
		sv.t.Fatal(err)
	}
	sv.must("POST", fmt.Sprintf("/v1/append?epoch=%d", l.Epoch), tok, line(run, "RunAdmitted", "")+line(run, "RunConcluded", `"outcome":"succeeded"`))
	sv.must("POST", "/v1/runs/"+run.String()+"/seal", tok, fmt.Sprintf(`{"epoch":%d,"outcome":"succeeded"}`, l.Epoch))
	return run
}

func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func createToken(t *testing.T, db, tenant, role string) string {
	t.Helper()
	return strings.TrimSpace(mustCLI(t, db, "", "--tenant", tenant, "token", "create", "--role", role))
}

// TestServeWitnessedEndToEnd: journal serve with two witnesses and a 2-of-2
// policy produces a witnessed checkpoint that verifies with x/mod's note and
// transparency-dev/formats; a witness that is down delays publication and
// never loses it.
func TestServeWitnessedEndToEnd(t *testing.T) {
	db := filepath.Join(t.TempDir(), "j.db")
	const origin = "example.com/e2e"
	mustCLI(t, db, "", "init", "--origin", origin)
	vkey := strings.TrimSpace(mustCLI(t, db, "", "key"))
	w1 := newTestWitness(t, "w1.example", origin, vkey)
	w2 := newTestWitness(t, "w2.example", origin, vkey)
	policy := filepath.Join(t.TempDir(), "policy")
	pol := fmt.Sprintf("log %s\nwitness w1 %s http://%s\nwitness w2 %s http://%s\ngroup both all w1 w2\nquorum both\n", vkey, w1.vkey, w1.addr, w2.vkey, w2.addr)
	if err := os.WriteFile(policy, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	writer := createToken(t, db, "default", "writer")
	sv := startServe(t, db, "--policy", policy, "--public")

	sv.sealViaAPI(writer)
	witnessedSize := func() uint64 {
		code, body := sv.do("GET", "/v1/checkpoint/witnessed", "", "")
		if code == http.StatusNotFound {
			return 0
		}
		if code != http.StatusOK {
			t.Fatalf("GET witnessed: %d %s", code, body)
		}
		text, _, _ := strings.Cut(body, "\n\n")
		c, err := checkpoint.Parse([]byte(text + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c.Size
	}
	pollUntil(t, "size 1 is witnessed", func() bool { return witnessedSize() == 1 })
	_, body := sv.do("GET", "/v1/checkpoint/witnessed", "", "")
	verifyInterop(t, []byte(body), origin, vkey, w1.vkey, w2.vkey)

	// w2 goes down: w1 keeps cosigning, nothing new is witnessed.
	w2.stop()
	sv.sealViaAPI(writer)
	pollUntil(t, "w1 cosigns size 2", func() bool {
		code, b := sv.do("GET", "/v1/checkpoint/2", "", "")
		return code == http.StatusOK && strings.Contains(b, "\u2014 w1.example ")
	})
	if got := witnessedSize(); got != 1 {
		t.Fatalf("witnessed size %d while w2 is down; 2-of-2 cannot be met", got)
	}
	// A restart of the server while w2 is down loses nothing.
	sv.stop()
	w2.start()
	sv = startServe(t, db, "--policy", policy, "--public")
	pollUntil(t, "size 2 is witnessed once w2 is back", func() bool { return witnessedSize() == 2 })
	_, body = sv.do("GET", "/v1/checkpoint/witnessed", "", "")
	verifyInterop(t, []byte(body), origin, vkey, w1.vkey, w2.vkey)
	metrics := sv.must("GET", "/metrics", writer, "")
	for _, m := range []string{`runseal_publisher_witnessed_size{tenant="default"} 2`, `runseal_publisher_cosigned_size{tenant="default",witness="w2.example+`, "runseal_http_requests_total"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	sv.stop()

	// Under a stricter policy, what was witnessed under the old one is not
	// vouched for.
	w3 := journaltest.NewWitness(t, "w3.example").VKey
	strict := filepath.Join(t.TempDir(), "strict")
	pol3 := fmt.Sprintf("log %s\nwitness w1 %s http://%s\nwitness w2 %s http://%s\nwitness w3 %s http://127.0.0.1:1\ngroup all3 all w1 w2 w3\nquorum all3\n",
		vkey, w1.vkey, w1.addr, w2.vkey, w2.addr, w3)
	if err := os.WriteFile(strict, []byte(pol3), 0o644); err != nil {
		t.Fatal(err)
	}
	sv = startServe(t, db, "--policy", strict, "--public")
	if code, b := sv.do("GET", "/v1/checkpoint/witnessed", "", ""); code == http.StatusOK {
		t.Errorf("served a checkpoint witnessed under a weaker policy as witnessed:\n%s", b)
	}
	sv.stop()
	if r := cli(t, db, "", "witnessed", "--policy", strict); r.code != exitFailure {
		t.Errorf("journal witnessed --policy (stricter): exit %d, want 1", r.code)
	}

	out := mustCLI(t, db, "", "witnessed", "--json", "--policy", policy)
	var wj struct {
		Size         uint64
		Note         string
		Cosignatures []checkpoint.Cosignature
	}
	if err := json.Unmarshal([]byte(out), &wj); err != nil || wj.Size != 2 || len(wj.Cosignatures) != 2 {
		t.Fatalf("journal witnessed --json = %s (%v)", out, err)
	}
	if txt := mustCLI(t, db, "", "witnessed"); txt != wj.Note {
		t.Errorf("journal witnessed printed %q, want the note %q", txt, wj.Note)
	}
}

// verifyInterop checks a witnessed note with x/mod's note.Open and with
// transparency-dev/formats' log.ParseCheckpoint, each with its own
// verifiers, never ours.
func verifyInterop(t *testing.T, msg []byte, origin, logVKey string, witnessVKeys ...string) {
	t.Helper()
	lv, err := note.NewVerifier(logVKey)
	if err != nil {
		t.Fatal(err)
	}
	vs := []note.Verifier{lv}
	for _, k := range witnessVKeys {
		wv, err := fnote.NewVerifierForCosignatureV1(k)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, wv)
	}
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		t.Fatalf("x/mod note.Open: %v\n%s", err, msg)
	}
	if len(n.Sigs) != 1+len(witnessVKeys) || len(n.UnverifiedSigs) != 0 {
		t.Errorf("x/mod verified %d signatures (%d unverified), want %d", len(n.Sigs), len(n.UnverifiedSigs), 1+len(witnessVKeys))
	}
	cp, _, fn, err := flog.ParseCheckpoint(msg, origin, lv, vs[1:]...)
	if err != nil {
		t.Fatalf("formats log.ParseCheckpoint: %v\n%s", err, msg)
	}
	if cp.Origin != origin || len(fn.Sigs) != 1+len(witnessVKeys) {
		t.Errorf("formats: origin %q, %d signatures verified", cp.Origin, len(fn.Sigs))
	}
}

// TestServeAuth: without a token only /healthz and, with --public, the
// read surface answer; a reader cannot write; another tenant's token is
// refused; a revoked token stops working.
func TestServeAuth(t *testing.T) {
	db := newJournal(t)
	writer := createToken(t, db, "default", "writer")
	reader := createToken(t, db, "default", "reader")
	other := createToken(t, db, "acme", "writer")
	sv := startServe(t, db)
	run := sv.sealViaAPI(writer)
	pollUntil(t, "a checkpoint is signed", func() bool {
		code, _ := sv.do("GET", "/v1/checkpoint", writer, "")
		return code == http.StatusOK
	})

	for _, c := range []struct {
		method, path, token, body string
		want                      int
	}{
		{"GET", "/healthz", "", "", 200},
		{"GET", "/v1/checkpoint", "", "", 401},
		{"GET", "/v1/proof/consistency?old=0&new=1", "", "", 401},
		{"GET", "/v1/runs", "", "", 401},
		{"GET", "/metrics", "", "", 401},
		{"GET", "/v1/runs", "Bearer-less", "", 401},
		{"GET", "/v1/runs", "rs_0000000000000000_" + strings.Repeat("A", 43), "", 401},
		{"GET", "/v1/runs", reader, "", 200},
		{"GET", "/v1/runs/" + run.String() + "/records", reader, "", 200},
		{"GET", "/v1/checkpoint", reader, "", 200},
		{"GET", "/metrics", reader, "", 200},
		{"POST", "/v1/runs/" + run.String() + "/cancel", reader, `{"actor":"a","reason":"r"}`, 403},
		{"POST", "/v1/runs/" + store.NewRunID().String() + "/lease", reader, `{"owner":"o","ttl_seconds":5}`, 403},
		{"GET", "/v1/runs", other, "", 403},
		{"GET", "/v1/runs?tenant=acme", writer, "", 403},
		{"GET", "/v1/runs?tenant=acme", other, "", 404}, // a tenant this server does not serve
		{"POST", "/v1/runs/" + run.String() + "/cancel", writer, `{"actor":"a","reason":"r"}`, 200},
		{"POST", "/v1/append?epoch=1", writer, line(run, "Note", ""), 409}, // sealed
		{"GET", "/v1/proof/inclusion?run=" + run.String() + "&size=1", reader, "", 200},
		{"GET", "/v1/proof/consistency?old=2&new=1", reader, "", 400},
	} {
		tok := c.token
		code, body := sv.do(c.method, c.path, tok, c.body)
		if code != c.want {
			t.Errorf("%s %s (token %.8q): %d %s, want %d", c.method, c.path, tok, code, body, c.want)
		}
		if code >= 400 && c.path != "/healthz" {
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
				t.Errorf("%s %s: error body %q is not {\"error\":...}", c.method, c.path, body)
			}
		}
	}
	// Revocation takes effect on the running server, within the token
	// cache's TTL (--token-cache-ttl, 1 s by default).
	id := strings.Split(reader, "_")[1]
	mustCLI(t, db, "", "token", "revoke", id)
	pollUntil(t, "the revoked token is refused", func() bool {
		code, _ := sv.do("GET", "/v1/runs", reader, "")
		return code == 401
	})
	list := mustCLI(t, db, "", "token", "list", "--json")
	if strings.Contains(list, reader) || strings.Contains(list, writer) {
		t.Errorf("token list shows a secret: %s", list)
	}
}

// TestServePublicSurface: with --public the checkpoint and proof reads
// answer without a token, exactly as spec/http.md says, and nothing else.
func TestServePublicSurface(t *testing.T) {
	db := newJournal(t)
	writer := createToken(t, db, "default", "writer")
	sv := startServe(t, db, "--public")
	if code, _ := sv.do("GET", "/v1/checkpoint/witnessed", "", ""); code != 404 {
		t.Errorf("witnessed with no policy: %d, want 404", code)
	}
	run := sv.sealViaAPI(writer)
	sv.sealViaAPI(writer)
	pollUntil(t, "size 2 is signed", func() bool {
		code, b := sv.do("GET", "/v1/checkpoint", "", "")
		return code == 200 && strings.Contains(b, "\n2\n")
	})
	vkey := strings.TrimSpace(mustCLI(t, db, "", "key"))
	lv, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	_, b := sv.do("GET", "/v1/checkpoint", "", "")
	if _, err := note.Open([]byte(b), note.VerifierList(lv)); err != nil {
		t.Errorf("GET /v1/checkpoint does not open with x/mod: %v\n%s", err, b)
	}
	if code, b := sv.do("GET", "/v1/checkpoint/2", "", ""); code != 200 || !strings.Contains(b, "\n2\n") {
		t.Errorf("GET /v1/checkpoint/2: %d %s", code, b)
	}
	if code, _ := sv.do("GET", "/v1/checkpoint/99", "", ""); code != 404 {
		t.Errorf("GET /v1/checkpoint/99: %d, want 404", code)
	}
	var inc struct {
		Run   string
		Index uint64
		Size  uint64
		Proof []string
	}
	code, body := sv.do("GET", "/v1/proof/inclusion?run="+run.String()+"&size=2", "", "")
	if err := json.Unmarshal([]byte(body), &inc); code != 200 || err != nil || inc.Index != 0 || inc.Size != 2 || len(inc.Proof) != 1 {
		t.Errorf("inclusion: %d %s", code, body)
	}
	if code, _ := sv.do("GET", "/v1/proof/inclusion?run="+run.String()+"&size=0", "", ""); code != 404 {
		t.Errorf("inclusion below the run's leaf: %d, want 404", code)
	}
	if code, body := sv.do("GET", "/v1/proof/consistency?old=1&new=2", "", ""); code != 200 || !strings.Contains(body, `"proof":[`) {
		t.Errorf("consistency: %d %s", code, body)
	}
	if code, _ := sv.do("GET", "/v1/runs", "", ""); code != 401 {
		t.Errorf("listing without a token under --public: %d, want 401", code)
	}
}

// TestServeFirstStart: serve with no journal creates it and its key and
// says where.
func TestServeFirstStart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "fresh.db")
	sv := startServe(t, db)
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("no journal created: %v", err)
	}
	if fi, err := os.Stat(db + ".key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key: %v", err)
	}
	if !strings.Contains(sv.stderr.String(), "created journal at "+db) {
		t.Errorf("serve did not say where it created the journal:\n%s", sv.stderr.String())
	}
	if code, _ := sv.do("GET", "/healthz", "", ""); code != 200 {
		t.Errorf("healthz: %d", code)
	}
}

// TestServeAPI walks every read and write route once and checks the shape
// of each answer.
func TestServeAPI(t *testing.T) {
	db := newJournal(t)
	tok := createToken(t, db, "default", "writer")
	sv := startServe(t, db, "--checkpoint-interval", "1h", "--checkpoint-every", "1000")
	run := store.NewRunID()
	r := "/v1/runs/" + run.String()

	var l store.Lease
	if err := json.Unmarshal([]byte(sv.must("POST", r+"/lease", tok, `{"owner":"w","ttl_seconds":30}`)), &l); err != nil || l.Epoch != 1 || l.Owner != "w" {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	if code, _ := sv.do("POST", r+"/lease", tok, `{"owner":"w","ttl_seconds":30}`); code != 409 {
		t.Errorf("acquire of a held lease: %d, want 409", code)
	}
	if code, _ := sv.do("POST", r+"/lease", tok, `{"owner":"w","ttl_seconds":30,"extra":1}`); code != 400 {
		t.Errorf("unknown field: %d, want 400", code)
	}
	// 18446744104 s times 1e9 wraps int64 nanoseconds to about 30 s: it must
	// be refused, not granted as a lease nobody asked for.
	other := "/v1/runs/" + store.NewRunID().String()
	for _, ttl := range []string{"0", "-5", "18446744104", "9223372036854775807"} {
		if code, body := sv.do("POST", other+"/lease", tok, `{"owner":"w","ttl_seconds":`+ttl+`}`); code != 400 || !strings.Contains(body, "ttl_seconds") {
			t.Errorf("acquire with ttl_seconds %s: %d %s, want 400 naming ttl_seconds", ttl, code, body)
		}
	}
	if code, _ := sv.do("POST", r+"/lease/renew", tok, `{"owner":"w","epoch":1,"ttl_seconds":18446744104}`); code != 400 {
		t.Errorf("renew with a wrapping ttl_seconds: %d, want 400", code)
	}
	var l2 store.Lease
	if err := json.Unmarshal([]byte(sv.must("POST", r+"/lease/renew", tok, `{"owner":"w","epoch":1,"ttl_seconds":60}`)), &l2); err != nil || l2.Epoch != 1 || !l2.Expires.After(l.Expires) {
		t.Errorf("renew: %+v %v", l2, err)
	}
	if code, _ := sv.do("POST", r+"/lease/renew", tok, `{"owner":"x","epoch":1,"ttl_seconds":60}`); code != 409 {
		t.Errorf("renew by another owner: %d, want 409", code)
	}
	var acks struct {
		Records []struct {
			Line int
			Seq  uint64
			Hash string
		}
	}
	body := line(run, "RunAdmitted", `"source":"api"`) + line(run, "Note", `"text":"x"`) + line(run, "RunConcluded", `"outcome":"succeeded"`)
	if err := json.Unmarshal([]byte(sv.must("POST", "/v1/append?epoch=1", tok, body)), &acks); err != nil || len(acks.Records) != 3 || acks.Records[2].Seq != 3 {
		t.Fatalf("append: %+v %v", acks, err)
	}
	if code, _ := sv.do("POST", "/v1/append?epoch=2", tok, line(run, "Note", "")); code != 409 {
		t.Errorf("append under a stale epoch: %d, want 409 (fenced)", code)
	}
	if code, _ := sv.do("POST", "/v1/append?epoch=1", tok, `{"run":"nope"}`); code != 400 {
		t.Errorf("malformed append: %d, want 400", code)
	}
	if code, _ := sv.do("POST", "/v1/append", tok, line(run, "Note", "")); code != 400 {
		t.Errorf("append without epoch: %d, want 400", code)
	}
	var recs struct {
		Records []struct {
			Seq uint64
			Raw json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(sv.must("GET", r+"/records?from=2&limit=1", tok, "")), &recs); err != nil || len(recs.Records) != 1 || recs.Records[0].Seq != 2 || !strings.Contains(string(recs.Records[0].Raw), `"kind":"Note"`) {
		t.Errorf("read page: %+v %v", recs, err)
	}
	if b := sv.must("GET", r+"/head", tok, ""); !strings.Contains(b, `"seq":3`) {
		t.Errorf("head: %s", b)
	}
	if b := sv.must("GET", r+"/verify", tok, ""); !strings.Contains(b, `"ok":true`) {
		t.Errorf("verify: %s", b)
	}
	for q, want := range map[string]string{
		"?by=id":                        run.String(),
		"?by=recent&source=api":         run.String(),
		"?by=outcome&outcome=succeeded": run.String(),
		"?by=waiting":                   `"runs":[]`,
		"?by=abandoned":                 `"runs":[]`,
	} {
		if b := sv.must("GET", "/v1/runs"+q, tok, ""); !strings.Contains(b, want) {
			t.Errorf("GET /v1/runs%s: %s, want %s", q, b, want)
		}
	}
	if code, _ := sv.do("GET", "/v1/runs?by=nope", tok, ""); code != 400 {
		t.Errorf("unknown listing: %d, want 400", code)
	}
	if code, _ := sv.do("GET", "/v1/runs?limit=0", tok, ""); code != 400 {
		t.Errorf("limit 0: %d, want 400", code)
	}
	if b := sv.must("GET", r+"/cancellation", tok, ""); !strings.Contains(b, `"cancellation":null`) {
		t.Errorf("cancellation before any: %s", b)
	}
	if code, _ := sv.do("POST", "/v1/checkpoint", tok, ""); code != 409 {
		t.Errorf("signing an empty log: %d, want 409", code)
	}
	if b := sv.must("POST", r+"/seal", tok, `{"epoch":1,"outcome":"succeeded"}`); !strings.Contains(b, `"leaf"`) {
		t.Errorf("seal: %s", b)
	}
	if code, _ := sv.do("POST", r+"/seal", tok, `{"epoch":1,"outcome":"bogus"}`); code < 400 || code >= 500 {
		t.Errorf("seal with a bad outcome: %d, want 4xx", code)
	}
	n := sv.must("POST", "/v1/checkpoint", tok, "")
	if !strings.Contains(n, "\n1\n") || !strings.Contains(n, "\u2014 ") {
		t.Errorf("POST /v1/checkpoint: %q", n)
	}
	if got := sv.must("GET", "/v1/checkpoint", tok, ""); got != n {
		t.Errorf("GET /v1/checkpoint = %q, want the note just signed %q", got, n)
	}
	if b := sv.must("POST", r+"/lease/release", tok, `{"epoch":1}`); !strings.Contains(b, `"released":true`) {
		t.Errorf("release: %s", b)
	}
	if b := sv.must("POST", r+"/cancel", tok, `{"actor":"ops","reason":"test"}`); !strings.Contains(b, `"created":true`) {
		t.Errorf("cancel: %s", b)
	}
	if code, _ := sv.do("GET", "/v1/runs/not-a-run/head", tok, ""); code != 400 {
		t.Errorf("bad run id: %d, want 400", code)
	}
}

// TestServeTenants: one server, two tenants of one journal file, each with
// its own log (origin) and checkpoints; a token reaches only its tenant.
func TestServeTenants(t *testing.T) {
	db := newJournal(t)
	def := createToken(t, db, "default", "writer")
	acme := createToken(t, db, "acme", "writer")
	sv := startServe(t, db, "--tenants", "acme")
	sv.sealViaAPI(def)
	sv.tenant = "acme"
	sv.sealViaAPI(acme)
	sv.sealViaAPI(acme)
	pollUntil(t, "acme's size 2 is signed", func() bool {
		code, b := sv.do("GET", "/v1/checkpoint", acme, "")
		return code == 200 && strings.Contains(b, "\n2\n")
	})
	_, b := sv.do("GET", "/v1/checkpoint", acme, "")
	if first, _, _ := strings.Cut(b, "\n"); !strings.HasSuffix(first, "/acme") {
		t.Errorf("acme's checkpoint origin %q is not <log origin>/acme", first)
	}
	vkey := strings.TrimSpace(mustCLI(t, db, "", "--tenant", "acme", "key"))
	lv, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open([]byte(b), note.VerifierList(lv)); err != nil {
		t.Errorf("acme's checkpoint does not open with acme's key: %v", err)
	}
	if code, _ := sv.do("GET", "/v1/runs", def, ""); code != 403 {
		t.Errorf("default's token on acme: %d, want 403", code)
	}
	sv.tenant = ""
	pollUntil(t, "default's size 1 is signed", func() bool {
		code, b := sv.do("GET", "/v1/checkpoint", def, "")
		return code == 200 && strings.Contains(b, "\n1\n")
	})
	if code, _ := sv.do("GET", "/v1/runs", acme, ""); code != 403 {
		t.Errorf("acme's token on default: %d, want 403", code)
	}
	if code, _ := sv.do("GET", "/v1/runs?tenant=zeta", acme, ""); code != 403 {
		t.Errorf("acme's token on an unserved tenant: %d, want 403", code)
	}
	sv.stop()

	// Restarted with --wait-warm, serve reads the file's proof pages in
	// before it listens, once for the file both tenants share: the warm's
	// line comes before "serving".
	sv = startServe(t, db, "--tenants", "acme", "--wait-warm")
	errs := sv.stderr.String()
	at := strings.Index(errs, "tenant default: proofs' pages warmed in ")
	serving := strings.Index(errs, "journal: serving")
	if at < 0 || serving < 0 || at > serving || !strings.Contains(errs[at:], "(b-tree walk, ") {
		t.Errorf("--wait-warm: no warm line before listening:\n%s", errs)
	}
	if n := strings.Count(errs, "proofs' pages warmed in "); n != 1 {
		t.Errorf("--wait-warm: %d warm lines for one file, want 1:\n%s", n, errs)
	}
	sv.tenant = "acme"
	if code, b := sv.do("GET", "/v1/checkpoint", acme, ""); code != 200 || !strings.Contains(b, "\n2\n") {
		t.Errorf("acme's checkpoint after a warm start: %d %s", code, b)
	}
}
