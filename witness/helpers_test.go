package witness

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/runseal/runseal/checkpoint"
)

// testTree is an RFC 6962 tree kept with golang.org/x/mod/sumdb/tlog, an
// implementation independent of this module's, so the witness's proof
// checks are tested against proofs it did not make.
type testTree struct {
	mu     sync.Mutex
	stored []tlog.Hash
	size   int64
	seed   string // distinguishes the leaves of forks
}

func (t *testTree) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x >= int64(len(t.stored)) {
				return nil, fmt.Errorf("hash %d not stored", x)
			}
			out[i] = t.stored[x]
		}
		return out, nil
	})
}

// grow appends n leaves and returns the new size.
func (t *testTree) grow(n int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for range n {
		var leaf [8]byte
		binary.BigEndian.PutUint64(leaf[:], uint64(t.size))
		hs, err := tlog.StoredHashes(t.size, append([]byte(t.seed), leaf[:]...), t.reader())
		if err != nil {
			panic(err)
		}
		t.stored = append(t.stored, hs...)
		t.size++
	}
	return uint64(t.size)
}

func (t *testTree) root(size uint64) [32]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if size == 0 {
		return sha256.Sum256(nil)
	}
	h, err := tlog.TreeHash(int64(size), t.reader())
	if err != nil {
		panic(err)
	}
	return h
}

func (t *testTree) proof(old, size uint64) [][32]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old == 0 || old == size {
		return nil
	}
	p, err := tlog.ProveTree(int64(size), int64(old), t.reader())
	if err != nil {
		panic(err)
	}
	out := make([][32]byte, len(p))
	for i := range p {
		out[i] = p[i]
	}
	return out
}

// fork returns a copy of t that will grow differently from t.
func (t *testTree) fork(seed string) *testTree {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &testTree{stored: append([]tlog.Hash(nil), t.stored...), size: t.size, seed: seed}
}

// testLog is a log with a key and a tree.
type testLog struct {
	origin string
	signer note.Signer
	vkey   string
	tree   *testTree
}

func newTestLog(t testing.TB, origin string) *testLog {
	t.Helper()
	skey, vkey, err := checkpoint.GenerateLogKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := checkpoint.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{origin: origin, signer: s, vkey: vkey, tree: &testTree{}}
}

// note returns the log's signed checkpoint at size, from tree (l.tree if nil).
func (l *testLog) note(t testing.TB, size uint64, tree *testTree) []byte {
	t.Helper()
	if tree == nil {
		tree = l.tree
	}
	n, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: l.origin, Size: size, Root: tree.root(size)}, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

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
	clock   *fakeClock
	metrics *Metrics
	reg     *prometheus.Registry
	logBuf  *syncBuffer
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
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
	skey, _, err := checkpoint.GenerateCosignerKey(rand.Reader, testWitnessName)
	if err != nil {
		t.Fatal(err)
	}
	c, err := checkpoint.NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &env{t: t, dir: dir, path: filepath.Join(dir, "witness.db"), cosign: c,
		clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}, logBuf: &syncBuffer{}}
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

func (e *env) addLog(l *testLog) {
	e.t.Helper()
	if err := e.store.AddLog(context.Background(), LogConfig{Origin: l.origin, Keys: []string{l.vkey}, QPD: MaxQPD, Burst: MaxQPD}); err != nil {
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
func (e *env) mustCosign(l *testLog, old, size uint64) *checkpoint.Signed {
	e.t.Helper()
	n := l.note(e.t, size, nil)
	lines, err := e.client.AddCheckpoint(context.Background(), old, l.tree.proof(old, size), n)
	if err != nil {
		e.t.Fatalf("add-checkpoint %s %d→%d: %v", l.origin, old, size, err)
	}
	return e.verifyCosigned(l, n, lines)
}

// verifyCosigned checks that lines are exactly the witness's cosignatures
// on n.
func (e *env) verifyCosigned(l *testLog, n, lines []byte) *checkpoint.Signed {
	e.t.Helper()
	logV, err := checkpoint.NewVerifier(l.vkey)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := checkpoint.Open(n, note.VerifierList(logV))
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
