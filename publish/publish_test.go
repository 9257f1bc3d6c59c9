package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/witness"
)

// liveWitness is a witness on a real 127.0.0.1 listener that can be stopped
// and started again on the same address, as a witness that goes down.
type liveWitness struct {
	t         *testing.T
	name      string
	vkey      string
	addr      string
	cosigner  *checkpoint.Cosigner
	logOrigin string
	logVKey   string
	h         http.Handler
	mu        sync.Mutex
	st        *witness.Store // under mu
	inner     http.Handler   // under mu
	srv       *http.Server
	calls     int
}

func newLiveWitness(t *testing.T, name, logOrigin, logVKey string) *liveWitness {
	t.Helper()
	k := journaltest.NewWitness(t, name)
	lw := &liveWitness{t: t, name: name, vkey: k.VKey, cosigner: k.Cosigner, logOrigin: logOrigin, logVKey: logVKey}
	lw.loseState()
	lw.h = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		lw.mu.Lock()
		lw.calls++
		h := lw.inner
		lw.mu.Unlock()
		h.ServeHTTP(rw, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lw.addr = ln.Addr().String()
	lw.serve(ln)
	t.Cleanup(lw.stop)
	return lw
}

// loseState gives the witness a fresh state file that knows the log at size
// 0, with the same key: a witness restored from nothing, or from an old
// backup. It is also how the witness is first set up.
func (lw *liveWitness) loseState() {
	t := lw.t
	t.Helper()
	st, err := witness.OpenStore(context.Background(), filepath.Join(t.TempDir(), "w.db"), witness.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.AddLog(context.Background(), witness.LogConfig{Origin: lw.logOrigin, Keys: []string{lw.logVKey}, QPD: witness.MaxQPD, Burst: witness.MaxQPD}); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := witness.New(context.Background(), st, []*checkpoint.Cosigner{lw.cosigner}, witness.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h, err := w.Handler("")
	if err != nil {
		t.Fatal(err)
	}
	lw.mu.Lock()
	lw.st, lw.inner = st, h
	lw.mu.Unlock()
}

func (lw *liveWitness) url() string { return "http://" + lw.addr }

func (lw *liveWitness) serve(ln net.Listener) {
	srv := &http.Server{Handler: lw.h}
	lw.mu.Lock()
	lw.srv = srv
	lw.mu.Unlock()
	go srv.Serve(ln)
}

func (lw *liveWitness) stop() {
	lw.mu.Lock()
	srv := lw.srv
	lw.srv = nil
	lw.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// start listens again on the same address; the kernel may hold the port a
// moment after the close, so it retries briefly.
func (lw *liveWitness) start() {
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", lw.addr); err == nil {
			lw.serve(ln)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	lw.t.Fatalf("restart witness on %s: %v", lw.addr, err)
}

func (lw *liveWitness) callCount() int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.calls
}

// pubEnv is a journal with a log key, and the means to seal and sign.
type pubEnv struct {
	t      *testing.T
	j      *sqlite.Store
	signer note.Signer
	vkey   string
	logV   note.Verifier
}

func newPubEnv(t *testing.T) *pubEnv {
	t.Helper()
	j, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	l := journaltest.NewLog(t, j.Origin())
	return &pubEnv{t: t, j: j, signer: l.Signer, vkey: l.VKey, logV: l.Verifier}
}

// sealAndSign seals n runs and keeps a signed checkpoint of the new size.
func (e *pubEnv) sealAndSign(n int) uint64 {
	e.t.Helper()
	ctx := context.Background()
	for i := range n {
		r := store.NewRunID()
		batch := []store.Append{
			{Run: r, Kind: "Note", Fields: []byte(fmt.Sprintf(`{"i":%d}`, i))},
			{Run: r, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
		}
		if _, err := e.j.Append(ctx, 1, batch); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.j.Seal(ctx, r, 1, "succeeded"); err != nil {
			e.t.Fatal(err)
		}
	}
	cp, err := e.j.Checkpoint(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: cp.Root}, e.signer)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.j.SaveCheckpoint(ctx, store.SignedCheckpoint{Size: cp.Size, Root: cp.Root, Note: msg}); err != nil {
		e.t.Fatal(err)
	}
	return cp.Size
}

func policyFor(t *testing.T, logVKey, quorum string, ws ...*liveWitness) *checkpoint.Policy {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "log %s\n", logVKey)
	var names []string
	for _, w := range ws {
		fmt.Fprintf(&b, "witness %s %s %s\n", w.name, w.vkey, w.url())
		names = append(names, w.name)
	}
	fmt.Fprintf(&b, "group g %s %s\nquorum g\n", quorum, strings.Join(names, " "))
	p, err := checkpoint.ParsePolicy([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually polls cond until it holds or a generous deadline passes: the
// test asserts an outcome, never a timing.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startPublisher(t *testing.T, p *Publisher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func witnessedSize(t *testing.T, j *sqlite.Store) uint64 {
	w, err := j.LatestWitnessed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if w == nil {
		return 0
	}
	return w.Size
}

func TestPublisherTwoOfTwoDownWitnessDelaysNeverLoses(t *testing.T) {
	ctx := context.Background()
	e := newPubEnv(t)
	w1 := newLiveWitness(t, "w1.example", e.j.Origin(), e.vkey)
	w2 := newLiveWitness(t, "w2.example", e.j.Origin(), e.vkey)
	pol := policyFor(t, e.vkey, "all", w1, w2)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newPub := func() *Publisher {
		p, err := New(e.j, pol, e.logV, Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Poll: 50 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := newPub()
	stop := startPublisher(t, p)

	size1 := e.sealAndSign(3)
	if err := p.Enqueue(ctx, size1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first checkpoint is witnessed", func() bool { return witnessedSize(t, e.j) == size1 })

	w2.stop()
	size2 := e.sealAndSign(2)
	if err := p.Enqueue(ctx, size2); err != nil {
		t.Fatal(err)
	}
	id1, id2 := WitnessID(mustVerifier(t, w1.vkey)), WitnessID(mustVerifier(t, w2.vkey))
	eventually(t, "w1 cosigns the second checkpoint", func() bool {
		n, _, _ := e.j.LastCosigned(ctx, id1)
		return n == size2
	})
	eventually(t, "the publisher has retried the down witness", func() bool {
		pub, _ := e.j.NextPublication(ctx, id2)
		return pub != nil && pub.Attempts >= 2
	})
	if got := witnessedSize(t, e.j); got != size1 {
		t.Fatalf("witnessed size %d with w2 down; a 2-of-2 policy cannot be met", got)
	}

	// A restart of the publisher while w2 is down loses nothing: the
	// outbox is in the journal.
	stop()
	w2.start()
	startPublisher(t, newPub())
	eventually(t, "the second checkpoint is witnessed after w2 returns", func() bool { return witnessedSize(t, e.j) == size2 })

	w, err := e.j.LatestWitnessed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := pol.Verify(w.Note)
	if err != nil {
		t.Fatalf("witnessed note does not verify with the policy: %v\n%s", err, w.Note)
	}
	if got := len(signed.Cosignatures()); got != 2 {
		t.Errorf("witnessed note carries %d cosignatures, want 2", got)
	}
	if p, _ := e.j.NextPublication(ctx, id1); p != nil {
		t.Errorf("a publication is still pending for w1: %+v", p)
	}
}

func mustVerifier(t *testing.T, vkey string) *checkpoint.CosignatureVerifier {
	t.Helper()
	v, err := checkpoint.NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPublisherReprovesFrom409: a witness whose state the publisher does not
// know (cosigned by an earlier publisher, lost from our store) answers 409
// with its size, and the publisher proves from there.
func TestPublisherReprovesFrom409(t *testing.T) {
	ctx := context.Background()
	e := newPubEnv(t)
	w1 := newLiveWitness(t, "w1.example", e.j.Origin(), e.vkey)
	size1 := e.sealAndSign(4)
	sc, _ := e.j.SignedCheckpointAt(ctx, size1)
	c, err := witness.NewClient(w1.url(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddCheckpoint(ctx, 0, nil, sc.Note); err != nil {
		t.Fatal(err)
	}
	size2 := e.sealAndSign(3)
	pol := policyFor(t, e.vkey, "1", w1)
	p, err := New(e.j, pol, e.logV, Options{MinBackoff: 10 * time.Millisecond, Poll: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	startPublisher(t, p)
	eventually(t, "the checkpoint is witnessed", func() bool { return witnessedSize(t, e.j) == size2 })
	n, _, _ := e.j.LastCosigned(ctx, WitnessID(mustVerifier(t, w1.vkey)))
	if n != size2 {
		t.Errorf("last cosigned %d, want %d", n, size2)
	}
}

// TestPublisherKeepsOnlyVerifiedCosignatures: a "witness" answering with a
// line under the witness's key name that does not verify is never kept,
// and the checkpoint is never marked witnessed.
func TestPublisherKeepsOnlyVerifiedCosignatures(t *testing.T) {
	ctx := context.Background()
	e := newPubEnv(t)
	real := newLiveWitness(t, "w1.example", e.j.Origin(), e.vkey)
	// An impostor with a key of the same name, answering at the URL the
	// policy gives for the real witness's key.
	impostor := newLiveWitness(t, "w1.example", e.j.Origin(), e.vkey)
	real.stop()
	pol := policyFor(t, e.vkey, "1", &liveWitness{name: "w1", vkey: real.vkey, addr: impostor.addr})
	p, err := New(e.j, pol, e.logV, Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	startPublisher(t, p)
	size := e.sealAndSign(2)
	if err := p.Enqueue(ctx, size); err != nil {
		t.Fatal(err)
	}
	id := WitnessID(mustVerifier(t, real.vkey))
	eventually(t, "the impostor's answer was refused twice", func() bool {
		pub, _ := e.j.NextPublication(ctx, id)
		return pub != nil && pub.Attempts >= 2 && impostor.callCount() >= 2
	})
	pub, _ := e.j.NextPublication(ctx, id)
	if !strings.Contains(pub.LastError, "cosignature") {
		t.Errorf("last error %q does not name the bad cosignature", pub.LastError)
	}
	if cos, _ := e.j.Cosignatures(ctx, size); len(cos) != 0 {
		t.Fatalf("kept an unverified cosignature: %q", cos)
	}
	if got := witnessedSize(t, e.j); got != 0 {
		t.Fatalf("marked size %d witnessed on a forged cosignature", got)
	}
}

func TestBackoffCappedWithJitter(t *testing.T) {
	p := &Publisher{opts: Options{MinBackoff: time.Second, MaxBackoff: time.Minute}}
	for n := 1; n < 40; n++ {
		d := p.backoff(n)
		want := min(time.Second<<min(n-1, 20), time.Minute)
		if d < want/2 || d > want {
			t.Errorf("backoff(%d) = %v, want within [%v, %v]", n, d, want/2, want)
		}
	}
}

// TestPublisherCrashAfterWitnessCommit: the witness cosigned the queued
// checkpoint but the publisher died before keeping the answer. On restart
// the witness answers 409 with that very size; the publisher proves from
// there (an empty proof), gets the cosignature again and keeps it once.
func TestPublisherCrashAfterWitnessCommit(t *testing.T) {
	ctx := context.Background()
	e := newPubEnv(t)
	w1 := newLiveWitness(t, "w1.example", e.j.Origin(), e.vkey)
	size := e.sealAndSign(5)
	sc, _ := e.j.SignedCheckpointAt(ctx, size)
	c, err := witness.NewClient(w1.url(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddCheckpoint(ctx, 0, nil, sc.Note); err != nil {
		t.Fatal(err)
	}
	pol := policyFor(t, e.vkey, "1", w1)
	p, err := New(e.j, pol, e.logV, Options{MinBackoff: 10 * time.Millisecond, Poll: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	startPublisher(t, p)
	eventually(t, "the checkpoint is witnessed", func() bool { return witnessedSize(t, e.j) == size })
	cos, err := e.j.Cosignatures(ctx, size)
	if err != nil || len(cos) != 1 || strings.Count(string(cos[WitnessID(mustVerifier(t, w1.vkey))]), "\n") != 1 {
		t.Errorf("cosignatures kept: %q, %v; want one line from w1", cos, err)
	}
}

// TestPublisherWitnessAheadIsRefused: a witness claiming a size beyond the
// whole log saw another log under our origin. Nothing is kept, the
// checkpoint is not witnessed, and the error says why.
func TestPublisherWitnessAheadIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newPubEnv(t)
	vkey := journaltest.NewWitness(t, "liar.example").VKey
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", witness.ContentTypeTlogSize)
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, "1000000\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	liar := &liveWitness{name: "liar", vkey: vkey, addr: ln.Addr().String()}
	pol := policyFor(t, e.vkey, "1", liar)
	p, err := New(e.j, pol, e.logV, Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	startPublisher(t, p)
	size := e.sealAndSign(2)
	if err := p.Enqueue(ctx, size); err != nil {
		t.Fatal(err)
	}
	id := WitnessID(mustVerifier(t, vkey))
	eventually(t, "the lying witness was refused twice", func() bool {
		pub, _ := e.j.NextPublication(ctx, id)
		return pub != nil && pub.Attempts >= 2
	})
	pub, _ := e.j.NextPublication(ctx, id)
	if !strings.Contains(pub.LastError, ErrWitnessAhead.Error()) {
		t.Errorf("last error %q, want %q", pub.LastError, ErrWitnessAhead)
	}
	if n, ok, _ := e.j.LastCosigned(ctx, id); ok {
		t.Errorf("kept a cosigned size %d from a witness ahead of the log", n)
	}
	if got := witnessedSize(t, e.j); got != 0 {
		t.Fatalf("witnessed %d", got)
	}
}

// TestPublisherQuorumNone: a policy needing no cosignature marks each
// queued checkpoint witnessed at once, with the log signature alone.
func TestPublisherQuorumNone(t *testing.T) {
	ctx := context.Background()
	e := newPubEnv(t)
	pol, err := checkpoint.ParsePolicy([]byte("log " + e.vkey + "\nquorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(e.j, pol, e.logV, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	size := e.sealAndSign(1)
	if err := p.Enqueue(ctx, size); err != nil {
		t.Fatal(err)
	}
	if got := witnessedSize(t, e.j); got != size {
		t.Errorf("witnessed %d, want %d", got, size)
	}
}

// syncBuffer is a log sink that the publisher's goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// TestPublisherWitnessRollbackRaisesAlarm: a witness that cosigned our
// checkpoint at some size comes back having lost its state (restored from
// nothing) and answers 409 with a smaller size. That is not routine: the
// publisher logs an ERROR, counts it, keeps the alarm in the store where
// "journal witnessed" shows it, and still publishes from the witness's size.
func TestPublisherWitnessRollbackRaisesAlarm(t *testing.T) {
	ctx := context.Background()
	e := newPubEnv(t)
	w1 := newLiveWitness(t, "w1.example", e.j.Origin(), e.vkey)
	pol := policyFor(t, e.vkey, "1", w1)
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	p, err := New(e.j, pol, e.logV, Options{MinBackoff: 10 * time.Millisecond, Poll: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	size1 := e.sealAndSign(4)
	startPublisher(t, p)
	eventually(t, "the first checkpoint is witnessed", func() bool { return witnessedSize(t, e.j) == size1 })
	if a, err := e.j.WitnessAlarms(ctx); err != nil || len(a) != 0 {
		t.Fatalf("alarms before the rollback: %v %v", a, err)
	}

	w1.loseState()
	size2 := e.sealAndSign(3)
	if err := p.Enqueue(ctx, size2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second checkpoint is witnessed all the same", func() bool { return witnessedSize(t, e.j) == size2 })

	alarms, err := e.j.WitnessAlarms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := WitnessID(mustVerifier(t, w1.vkey))
	if len(alarms) != 1 || alarms[0].Witness != id || alarms[0].Kind != store.AlarmWitnessRolledBack ||
		alarms[0].Reported != 0 || alarms[0].Cosigned != size1 {
		t.Fatalf("alarms = %+v, want one %s for %s, reported 0, cosigned %d", alarms, store.AlarmWitnessRolledBack, id, size1)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "rolled back") {
		t.Errorf("no ERROR log for the rollback:\n%s", logs.String())
	}
	if got := counter(t, reg, "runseal_publisher_witness_rollback_total", id); got != 1 {
		t.Errorf("runseal_publisher_witness_rollback_total = %v, want 1", got)
	}
	var rb *RollbackError
	if err := error(&RollbackError{Witness: "w", Reported: 1, Cosigned: 2}); !errors.Is(err, ErrWitnessRolledBack) || !errors.As(err, &rb) {
		t.Errorf("RollbackError does not unwrap to ErrWitnessRolledBack")
	}
}

// counter returns the value of the counter name{witness=w} in reg.
func counter(t *testing.T, reg *prometheus.Registry, name, w string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "witness" && l.GetValue() == w {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestPublisherClockBackDoesNotStallRetry: a retry pending when the clock
// is stepped back an hour is not put off for that hour: a next attempt
// further away than MaxBackoff can only come from a clock that went back.
func TestPublisherClockBackDoesNotStallRetry(t *testing.T) {
	ctx := context.Background()
	e := newPubEnv(t)
	w := newLiveWitness(t, "w.example", e.j.Origin(), e.vkey)
	pol := policyFor(t, e.vkey, "all", w)
	id := WitnessID(mustVerifier(t, w.vkey))
	var back atomic.Bool
	now := func() time.Time {
		if back.Load() {
			return time.Now().Add(-time.Hour)
		}
		return time.Now()
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := New(e.j, pol, e.logV, Options{Now: now, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Poll: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w.stop()
	startPublisher(t, p)
	size := e.sealAndSign(2)
	if err := p.Enqueue(ctx, size); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an attempt failed and a retry is pending", func() bool {
		pub, _ := e.j.NextPublication(ctx, id)
		return pub != nil && pub.Attempts >= 1
	})
	back.Store(true)
	w.start()
	eventually(t, "the checkpoint is cosigned after the clock went back", func() bool {
		n, _, _ := e.j.LastCosigned(ctx, id)
		return n == size
	})
}
