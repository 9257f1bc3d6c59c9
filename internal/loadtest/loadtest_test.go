package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/witness"
)

// TestRun runs a short load test against the in-process witness: every
// request of a healthy run is answered 200 with a cosignature that
// verifies, and the report carries the ceilings.
func TestRun(t *testing.T) {
	rep, err := Run(context.Background(), Config{
		Logs: 4, StartQPS: 40, Factor: 1.5, MaxQPS: 70, Step: 400 * time.Millisecond,
		MaxP99: 10 * time.Second, Ceiling: 50 * time.Millisecond, Dir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	t.Logf("%s", b)
	// How far the run gets depends on what else the machine is doing; the
	// mechanics do not.
	if len(rep.Steps) == 0 || rep.Requests == 0 || len(rep.ErrorsByStatus) != 0 {
		t.Fatalf("report: %s", b)
	}
	best := 0.0
	for _, s := range rep.Steps {
		if s.Requests == 0 || s.P99Ms < s.P50Ms {
			t.Errorf("step %+v", s)
		}
		if s.Pass {
			best = max(best, s.AchievedQPS)
		}
	}
	if rep.SustainedQPS != best {
		t.Errorf("sustained %v, want the best passing step's %v", rep.SustainedQPS, best)
	}
	c := rep.Ceilings
	if c.Ed25519SignVerifyPerSec <= 0 || c.Ed25519SignPerSec <= 0 || c.Ed25519VerifyPerSec <= 0 || c.CryptoBoundQPS <= 0 || c.SQLiteCommitsPerSec <= 0 {
		t.Errorf("ceilings %+v", c)
	}
	if rep.Commit == nil || rep.Commit.Transactions == 0 {
		t.Errorf("commit stats %+v", rep.Commit)
	}
	if rep.StoppedBecause == "" {
		t.Error("no reason to stop")
	}
}

// TestVerify checks that the generator's check of the witness's answers can
// fail: a cosignature from another key, over another checkpoint, or
// tampered is refused.
func TestVerify(t *testing.T) {
	skey, _, _ := checkpoint.GenerateCosignerKey(rand.Reader, "w.example")
	c, _ := checkpoint.NewCosigner(skey)
	other, _, _ := checkpoint.GenerateCosignerKey(rand.Reader, "w.example")
	c2, _ := checkpoint.NewCosigner(other)
	lskey, _, _ := checkpoint.GenerateLogKey(rand.Reader, "log.example")
	ls, _ := checkpoint.NewSigner(lskey)
	cp := checkpoint.Checkpoint{Origin: "log.example", Size: 3, Root: [32]byte{3}}
	msg, _ := checkpoint.Sign(cp, ls)
	d := &driver{verifiers: note.VerifierList(c.Verifier()), nverifiers: 1}
	good, _ := checkpoint.SignatureLines(cp, c)
	if !d.verify(msg, good) {
		t.Fatal("valid cosignature refused")
	}
	wrongKey, _ := checkpoint.SignatureLines(cp, c2)
	cp2 := cp
	cp2.Size = 4
	wrongCP, _ := checkpoint.SignatureLines(cp2, c)
	tampered := bytes.Clone(good)
	tampered[len(tampered)-3] ^= 1
	for name, lines := range map[string][]byte{"other key": wrongKey, "other checkpoint": wrongCP, "tampered": tampered, "empty": nil} {
		if d.verify(msg, lines) {
			t.Errorf("%s: accepted", name)
		}
	}
}

// fakeLogs returns n simulated logs that are registered nowhere, for a
// driver pointed at a fake witness.
func fakeLogs(t *testing.T, n int) []*simLog {
	t.Helper()
	logs := make([]*simLog, n)
	for i := range logs {
		origin := fmt.Sprintf("loadtest.invalid/fake/%d", i)
		skey, _, err := checkpoint.GenerateLogKey(rand.Reader, origin)
		if err != nil {
			t.Fatal(err)
		}
		s, err := checkpoint.NewSigner(skey)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = &simLog{origin: origin, signer: s}
	}
	return logs
}

// fakeDriver drives a fake witness served by h.
func fakeDriver(t *testing.T, h http.HandlerFunc, step time.Duration) *driver {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := Config{Step: step, MaxP99: 10 * time.Second}
	cfg.defaults()
	tgt, err := newTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &driver{cfg: cfg, target: tgt}
}

// TestStepCountsAnswersAfterItsEnd: the open-loop step waits for the
// answers of every request it scheduled, even those that arrive after the
// step's time is up, and counts them for the step.
func TestStepCountsAnswersAfterItsEnd(t *testing.T) {
	const step = 50 * time.Millisecond
	var answered atomic.Int64
	d := fakeDriver(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * step) // every answer comes after the step ended
		answered.Add(1)
		io.WriteString(w, "\u2014 w.example AAAAAA==\n")
	}, step)
	st := d.step(context.Background(), fakeLogs(t, 4), 80) // 4 requests, one per log
	if st.Requests != 4 || len(st.Errors) != 0 || answered.Load() != 4 {
		t.Fatalf("step %+v, %d answered; want 4 requests, all answered 200 and counted", st, answered.Load())
	}
	if st.AchievedQPS != 80 {
		t.Errorf("achieved %v qps, want the 80 scheduled: late answers count", st.AchievedQPS)
	}
}

// TestStepLatencyFromScheduledTime: a log whose witness is slow to answer
// sends its next request late, and that request's latency counts from the
// time it was due, not from when it could be sent (no coordinated
// omission).
func TestStepLatencyFromScheduledTime(t *testing.T) {
	const stall = 200 * time.Millisecond
	var first atomic.Bool
	d := fakeDriver(t, func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			time.Sleep(stall) // the witness stalls on the first request only
		}
		io.WriteString(w, "\u2014 w.example AAAAAA==\n")
	}, 20*time.Millisecond)
	// One log, two requests due 10ms apart: the second waits for the first.
	st := d.step(context.Background(), fakeLogs(t, 1), 100)
	if st.Requests != 2 || len(st.Errors) != 0 {
		t.Fatalf("step %+v", st)
	}
	// The faster of the two answers is the second one, answered at once
	// but due 10ms after the first was sent, so at least stall-10ms late.
	if st.P50Ms < float64((stall-10*time.Millisecond)/time.Millisecond) {
		t.Errorf("p50 %vms: the delayed request's latency was measured from its sending, not its due time", st.P50Ms)
	}
}

// TestSearchBisectsToTheLimit: against a witness that holds any rate up to
// 1000 qps and fails above, the escalation (factor 1.3) stops a whole
// factor apart, and the bisection narrows the pair to within a few
// percent of 1000, its steps marked as refinements.
func TestSearchBisectsToTheLimit(t *testing.T) {
	const limit = 1000.0
	cfg := Config{StartQPS: 300, Factor: 1.3, MaxQPS: 50000, MaxP99: 250 * time.Millisecond}
	cfg.defaults()
	var steps []Step
	run := func(target float64, refine bool) Step {
		s := Step{TargetQPS: target, AchievedQPS: target, Requests: 100, P50Ms: 5, P99Ms: 10, Pass: true, Refine: refine}
		if target > limit {
			s.P99Ms, s.Pass = 900, false
		}
		steps = append(steps, s)
		return s
	}
	stopped, refined := search(context.Background(), cfg, run)
	if !strings.Contains(stopped, "p99") || len(refined) != 2 {
		t.Fatalf("stopped %q, refined %v", stopped, refined)
	}
	if lo, hi := refined[0], refined[1]; lo > limit || hi <= limit || hi/lo > 1.04 {
		t.Fatalf("refined to %v, want a pair around %v within 4%%", refined, limit)
	}
	nref := 0
	for _, s := range steps {
		if s.Refine {
			nref++
		}
	}
	if nref != cfg.Refine {
		t.Fatalf("%d refinement steps, want %d", nref, cfg.Refine)
	}
}

// TestSearchNoBisectionWithoutAFailure: a run that reaches the maximum rate
// has nothing to bisect.
func TestSearchNoBisectionWithoutAFailure(t *testing.T) {
	cfg := Config{StartQPS: 100, Factor: 2, MaxQPS: 500}
	cfg.defaults()
	n := 0
	stopped, refined := search(context.Background(), cfg, func(target float64, refine bool) Step {
		n++
		return Step{TargetQPS: target, AchievedQPS: target, Requests: 10, P99Ms: 1, Pass: true}
	})
	if !strings.Contains(stopped, "maximum") || refined != nil || n != 3 {
		t.Fatalf("stopped %q, refined %v after %d steps", stopped, refined, n)
	}
}

// TestStepClassifiesAnswersOnItsOwnConnections: each log's own keep-alive
// connection carries its requests, and answers are classified as
// witness.Client classifies them: 200, a 409 whose size the log adopts,
// other statuses, and a 200 whose body is not signature lines, which is no
// cosignature and was once counted as one. A witness that closes the
// connection after an answer costs nothing.
func TestStepClassifiesAnswersOnItsOwnConnections(t *testing.T) {
	var n atomic.Int64
	d := fakeDriver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/add-checkpoint" || r.Method != http.MethodPost || r.ContentLength <= 0 {
			http.Error(w, "bad request line", http.StatusBadRequest)
			return
		}
		switch n.Add(1) % 5 {
		case 1:
			io.WriteString(w, "\u2014 w.example AAAAAA==\n")
		case 2:
			w.Header().Set("Content-Type", witness.ContentTypeTlogSize)
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, "0\n") // the log adopts it: its next proof is from 0
		case 3:
			w.Header().Set("Connection", "close")
			io.WriteString(w, "\u2014 w.example AAAAAA==\n")
		case 4:
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case 0:
			io.WriteString(w, "not signature lines\n")
		}
	}, 50*time.Millisecond)
	logs := fakeLogs(t, 1)
	st := d.step(context.Background(), logs, 200) // 10 requests on one log
	if st.Requests != 10 || n.Load() != 10 {
		t.Fatalf("step %+v, %d served", st, n.Load())
	}
	want := map[string]int64{"409": 2, "429": 2, statusBadAnswer: 2}
	for k, v := range want {
		if st.Errors[k] != v {
			t.Errorf("errors %v, want %v", st.Errors, want)
			break
		}
	}
	if st.AchievedQPS != 4/d.cfg.Step.Seconds() {
		t.Errorf("achieved %v qps, want the 4 answers of 200", st.AchievedQPS)
	}
}
