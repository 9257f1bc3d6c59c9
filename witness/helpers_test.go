package witness

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/store/storetest"
)

// env is a witness behind a real HTTP server.
type env struct {
	t       testing.TB
	dir     string
	path    string
	store   *Store
	w       *Witness
	srv     *httptest.Server
	client  *Client
	cosign  *checkpoint.Cosigner
	clock   *storetest.FakeClock
	metrics *Metrics
	reg     *prometheus.Registry
	logBuf  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const testWitnessName = "witness.example/w1"

func newEnv(t testing.TB) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, path: filepath.Join(dir, "witness.db"), cosign: journaltest.NewWitness(t, testWitnessName).Cosigner,
		clock: storetest.NewFakeClock(), logBuf: &syncBuffer{}}
	st, err := OpenStore(context.Background(), e.path, StoreOptions{Create: true, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	e.start()
	t.Cleanup(e.stop)
	return e
}

// start (re)starts the witness and its HTTP server over e.store.
func (e *env) start() {
	t := e.t
	t.Helper()
	e.reg = prometheus.NewRegistry()
	m, err := NewMetrics(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	e.metrics = m
	logger := slog.New(slog.NewTextHandler(e.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := New(context.Background(), e.store, []*checkpoint.Cosigner{e.cosign}, Options{Now: e.clock.Now, Logger: logger, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	e.w = w
	h, err := w.Handler("")
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	e.client, err = NewClient(e.srv.URL, e.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) stop() {
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
	if e.store != nil {
		if err := e.store.Close(); err != nil {
			e.t.Errorf("close store: %v", err)
		}
		e.store = nil
	}
}

// restart closes everything and opens the same file again.
func (e *env) restart() {
	e.t.Helper()
	e.stop()
	st, err := OpenStore(context.Background(), e.path, StoreOptions{Now: e.clock.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
	e.start()
}

func (e *env) addLog(l *journaltest.Log) {
	e.t.Helper()
	if err := e.store.AddLog(context.Background(), LogConfig{Origin: l.Origin, Keys: []string{l.VKey}, QPD: MaxQPD, Burst: MaxQPD}); err != nil {
		e.t.Fatal(err)
	}
}

// post sends a raw body and returns the status, content type and body.
func (e *env) post(body []byte) (int, string, string) {
	e.t.Helper()
	resp, err := e.srv.Client().Post(e.srv.URL+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func (e *env) get(path string) (int, http.Header, string) {
	e.t.Helper()
	resp, err := e.srv.Client().Get(e.srv.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// request builds an add-checkpoint body.
func request(old uint64, proof [][32]byte, n []byte) []byte {
	return (&AddCheckpointRequest{Old: old, Proof: proof, Note: n}).Marshal()
}

// mustCosign submits the log's checkpoint at size from old and fails the
// test unless the witness cosigns it; it returns the verified note.
func (e *env) mustCosign(l *journaltest.Log, old, size uint64) *checkpoint.Signed {
	e.t.Helper()
	n := l.Note(e.t, size, nil)
	lines, err := e.client.AddCheckpoint(context.Background(), old, l.Tree.Proof(old, size), n)
	if err != nil {
		e.t.Fatalf("add-checkpoint %s %d→%d: %v", l.Origin, old, size, err)
	}
	return e.verifyCosigned(l, n, lines)
}

// verifyCosigned checks that lines are exactly the witness's cosignatures
// on n.
func (e *env) verifyCosigned(l *journaltest.Log, n, lines []byte) *checkpoint.Signed {
	e.t.Helper()
	s, err := checkpoint.Open(n, note.VerifierList(l.Verifier))
	if err != nil {
		e.t.Fatal(err)
	}
	s2, err := s.WithSignatures(lines, note.VerifierList(e.cosign.Verifier()))
	if err != nil {
		e.t.Fatalf("cosignature lines %q: %v", lines, err)
	}
	if got := strings.Count(string(lines), "\n"); got != 1 {
		e.t.Fatalf("answer has %d lines, want only the witness's one cosignature: %q", got, lines)
	}
	if len(s2.Cosignatures()) != 1 {
		e.t.Fatalf("cosignatures = %v", s2.Cosignatures())
	}
	return s2
}

func listenLocal(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
