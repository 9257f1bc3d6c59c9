package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/command"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/monitor"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
	"golang.org/x/mod/sumdb/note"
)

// monitorOnce runs "monitor --once --json" and returns the exit code and
// the result it printed.
func monitorOnce(t *testing.T, e *env, url, state string) (int, checkResult) {
	t.Helper()
	code, out, errOut := cli(t, e.args("monitor", url, "--state", state, "--once", "--json")...)
	var res checkResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("monitor output %q (stderr %q): %v", out, errOut, err)
	}
	if res.Code != code {
		t.Fatalf("printed exit code %d, exited %d", res.Code, code)
	}
	return code, res
}

func savedSize(t *testing.T, e *env, state string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, monitor.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.policy.Verify(b, e.logV)
	if err != nil {
		t.Fatalf("saved state does not verify: %v", err)
	}
	return s.Checkpoint().Size
}

func TestMonitorFollowsAndRefuses(t *testing.T) {
	e := newEnv(t)
	e.addRun(false)
	e.addRun(false)
	f, srv := e.serve(e.j)
	state := filepath.Join(t.TempDir(), "state")

	code, res := monitorOnce(t, e, srv, state)
	if code != exitSound || res.Result != "started" || savedSize(t, e, state) != 2 {
		t.Fatalf("first check: %d %+v", code, res)
	}
	if code, res = monitorOnce(t, e, srv, state); code != exitSound || res.Result != "unchanged" {
		t.Fatalf("unchanged: %d %+v", code, res)
	}
	e.addRun(false)
	e.addRun(true) // unsealed: the log does not grow
	e.addRun(false)
	if code, res = monitorOnce(t, e, srv, state); code != exitSound || res.Result != "advanced" || savedSize(t, e, state) != 4 {
		t.Fatalf("advance: %d %+v", code, res)
	}

	// A rollback: the log serves an older, genuinely signed checkpoint.
	ctx := context.Background()
	cp, _ := e.j.Checkpoint(ctx)
	f.mu.Lock()
	f.override = e.signNote(rootAt(t, e.j, 2), 2)
	f.mu.Unlock()
	if code, res = monitorOnce(t, e, srv, state); code != exitNotSound || res.Result != "rollback" || savedSize(t, e, state) != 4 {
		t.Fatalf("rollback: %d %+v", code, res)
	}

	// A checkpoint whose log signature was tampered with.
	n := e.signNote(cp, 2)
	n[bytes.LastIndex(n, []byte("\u2014 example.com/log "))+len("\u2014 example.com/log ")+10] ^= 1
	f.mu.Lock()
	f.override = n
	f.mu.Unlock()
	if code, res = monitorOnce(t, e, srv, state); code != exitNotSound || res.Result != "invalid" {
		t.Fatalf("bad signature: %d %+v", code, res)
	}

	// Not enough witnesses yet: no verdict, state kept.
	e.addRun(false)
	cp5, _ := e.j.Checkpoint(ctx)
	f.mu.Lock()
	f.override = e.signNote(cp5, 1)
	f.mu.Unlock()
	if code, res = monitorOnce(t, e, srv, state); code != exitUnverifiable || savedSize(t, e, state) != 4 {
		t.Fatalf("quorum not met: %d %+v", code, res)
	}

	// The server is down.
	f.mu.Lock()
	f.override, f.fail = nil, true
	f.mu.Unlock()
	if code, res = monitorOnce(t, e, srv, state); code != exitUnverifiable || res.Result != "unverifiable" {
		t.Fatalf("server down: %d %+v", code, res)
	}
	f.mu.Lock()
	f.fail = false
	f.mu.Unlock()
	if code, res = monitorOnce(t, e, srv, state); code != exitSound || res.Result != "advanced" || savedSize(t, e, state) != 5 {
		t.Fatalf("recovered: %d %+v", code, res)
	}

	// A state file changed behind the monitor's back is refused.
	os.WriteFile(filepath.Join(state, monitor.StateFile), e.signNote(rootAt(t, e.j, 5), 1), 0o600)
	if code, res = monitorOnce(t, e, srv, state); code != exitUnverifiable {
		t.Fatalf("tampered state: %d %+v", code, res)
	}
}

// rootAt is the journal's checkpoint at an earlier size.
func rootAt(t *testing.T, j store.Journal, size uint64) store.Checkpoint {
	t.Helper()
	ctx := context.Background()
	cur, _ := j.Checkpoint(ctx)
	if size == cur.Size {
		return cur
	}
	// Rebuild the root of the first size leaves from their positions.
	var leaves []log.Hash
	var after *store.RunID
	for {
		runs, err := j.RunsByID(ctx, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 0 {
			break
		}
		ps, _ := j.LogPositions(ctx, runs)
		for _, p := range ps {
			if p != nil && p.Index < size {
				for uint64(len(leaves)) <= p.Index {
					leaves = append(leaves, log.Hash{})
				}
				leaves[p.Index] = log.Hash(p.Leaf)
			}
		}
		after = &runs[len(runs)-1]
	}
	var ms log.MemStore
	root, err := log.Append(ctx, &ms, 0, leaves...)
	if err != nil {
		t.Fatal(err)
	}
	return store.Checkpoint{Origin: cur.Origin, Size: size, Root: store.Digest(root)}
}

// forked builds a second journal with the first one's origin that shares
// its first leaves and then diverges, as a log showing two histories would.
func forked(t *testing.T, e *env, shared int) *sqlite.Store {
	t.Helper()
	j, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "fork.db"), sqlite.Options{Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	saved := e.j
	e.j = j
	for range shared {
		e.addRun(false)
	}
	e.j = saved
	return j
}

func TestMonitorDetectsForks(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(e *env, f *fakeServe)
	}{
		"a bigger log that is not an extension": {func(e *env, f *fakeServe) {
			j := forked(t, e, 0)
			saved := e.j
			e.j = j
			for range 5 {
				e.addRun(false)
			}
			e.j = saved
			f.j = j
		}},
		"the same size with another root": {func(e *env, f *fakeServe) {
			j := forked(t, e, 0)
			saved := e.j
			e.j = j
			for range 3 {
				e.addRun(false)
			}
			e.j = saved
			f.j = j
		}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			for range 3 {
				e.addRun(false)
			}
			f, srv := e.serve(e.j)
			state := filepath.Join(t.TempDir(), "state")
			if code, res := monitorOnce(t, e, srv, state); code != exitSound {
				t.Fatalf("first check: %+v", res)
			}
			f.mu.Lock()
			tc.setup(e, f)
			f.mu.Unlock()
			code, res := monitorOnce(t, e, srv, state)
			if code != exitFork || res.Result != "fork" || res.Evidence == "" {
				t.Fatalf("fork: %d %+v", code, res)
			}
			if savedSize(t, e, state) != 3 {
				t.Fatal("state moved to the forked checkpoint")
			}
			// The evidence stands alone: both notes verify with the keys it
			// names, and they contradict each other.
			b, err := os.ReadFile(res.Evidence)
			if err != nil {
				t.Fatal(err)
			}
			var ev monitor.Evidence
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			lv, err := checkpoint.NewVerifier(ev.LogKeys[0])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint.ParsePolicy([]byte(ev.PolicyText)); err != nil {
				t.Fatal(err)
			}
			// Equivocation rests on the log's own signatures: both notes
			// must carry it (cosignatures may be missing on the older one).
			s1, err1 := checkpoint.Open([]byte(ev.Saved.Note), note.VerifierList(lv))
			s2, err2 := checkpoint.Open([]byte(ev.Served.Note), note.VerifierList(lv))
			if err1 != nil || err2 != nil {
				t.Fatalf("evidence notes do not verify: %v %v", err1, err2)
			}
			if fi, err := os.Stat(res.Evidence); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("evidence file mode: %v %v, want 0600", fi.Mode(), err)
			}
			c1, c2 := s1.Checkpoint(), s2.Checkpoint()
			var proof []log.Hash
			for _, p := range ev.Proof {
				h, err := parseB64(p)
				if err != nil {
					t.Fatal(err)
				}
				proof = append(proof, h)
			}
			if err := log.VerifyConsistency(c1.Size, c2.Size, c1.Root, c2.Root, proof); err == nil {
				t.Fatal("the evidence's checkpoints are consistent")
			}
		})
	}
}

// TestMonitor_BadProofIsNotAFork stops issue 11 item 8: a consistency
// proof that fails while the log still signs the saved checkpoint is the
// server being wrong, not the log equivocating. It is no verdict (exit 3),
// writes no evidence, keeps the state, and the next good answer advances.
func TestMonitor_BadProofIsNotAFork(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.addRun(false)
	}
	f, srv := e.serve(e.j)
	state := filepath.Join(t.TempDir(), "state")
	if code, res := monitorOnce(t, e, srv, state); code != exitSound {
		t.Fatalf("first check: %+v", res)
	}
	e.addRun(false)
	e.addRun(false)
	f.mu.Lock()
	f.badProof = true
	f.mu.Unlock()
	code, res := monitorOnce(t, e, srv, state)
	if code != exitUnverifiable || res.Result != "bad_proof" || res.Evidence != "" || savedSize(t, e, state) != 3 {
		t.Fatalf("bad proof: %d %+v", code, res)
	}
	if ev, _ := filepath.Glob(filepath.Join(state, "fork-*")); len(ev) != 0 {
		t.Fatalf("evidence written for a bad proof: %v", ev)
	}
	f.mu.Lock()
	f.badProof = false
	f.mu.Unlock()
	if code, res = monitorOnce(t, e, srv, state); code != exitSound || res.Result != "advanced" || savedSize(t, e, state) != 5 {
		t.Fatalf("after the server recovers: %d %+v", code, res)
	}
}

// TestMonitor_ForkShownByTheSignedCheckpointAtTheSavedSize: from a saved
// size that is a power of two, a consistency proof's first hash is the
// saved root itself, so no proof can show the newer tree's prefix: the
// monitor asks for the checkpoint the log signed at the saved size, and
// another root there is the fork, with both notes as evidence.
func TestMonitor_ForkShownByTheSignedCheckpointAtTheSavedSize(t *testing.T) {
	e := newEnv(t)
	for range 4 {
		e.addRun(false)
	}
	f, srv := e.serve(e.j)
	state := filepath.Join(t.TempDir(), "state")
	if code, res := monitorOnce(t, e, srv, state); code != exitSound || res.Size != 4 {
		t.Fatalf("first check: %+v", res)
	}
	f.mu.Lock()
	j := forked(t, e, 0)
	saved := e.j
	e.j = j
	for range 6 {
		e.addRun(false)
	}
	e.j = saved
	f.j = j
	f.mu.Unlock()
	code, res := monitorOnce(t, e, srv, state)
	if code != exitFork || res.Evidence == "" || savedSize(t, e, state) != 4 {
		t.Fatalf("fork: %d %+v", code, res)
	}
	b, err := os.ReadFile(res.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	var ev monitor.Evidence
	if err := json.Unmarshal(b, &ev); err != nil || ev.Served.Size != 4 || ev.Saved.Size != 4 || ev.Served.Root == ev.Saved.Root {
		t.Fatalf("evidence: %+v %v", ev, err)
	}
}

// TestMonitor_RedactsCredentials: a URL with credentials in it is named
// without them in the logs and in fork evidence.
func TestMonitor_RedactsCredentials(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.addRun(false)
	}
	f, srv := e.serve(e.j)
	srv = strings.Replace(srv, "http://", "http://operator:hunter2@", 1) + "&token=s3cret"
	state := filepath.Join(t.TempDir(), "state")
	if code, _, errOut := cli(t, e.args("monitor", srv, "--state", state, "--once", "--log-level", "debug")...); code != exitSound || strings.Contains(errOut, "hunter2") || strings.Contains(errOut, "s3cret") {
		t.Fatalf("first check: %d %s", code, errOut)
	}
	f.mu.Lock()
	j := forked(t, e, 0)
	saved := e.j
	e.j = j
	for range 3 {
		e.addRun(false)
	}
	e.j = saved
	f.j = j
	f.mu.Unlock()
	code, out, errOut := cli(t, e.args("monitor", srv, "--state", state, "--once", "--json", "--log-level", "debug")...)
	var res checkResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitFork {
		t.Fatalf("fork: %d %s %s", code, out, errOut)
	}
	b, err := os.ReadFile(res.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"hunter2", "s3cret"} {
		if strings.Contains(string(b), leak) || strings.Contains(errOut, leak) || strings.Contains(out, leak) {
			t.Fatalf("%s leaked: evidence %s\nstderr %s", leak, b, errOut)
		}
	}
}

func parseB64(s string) (log.Hash, error) {
	var h log.Hash
	b, err := base64.StdEncoding.DecodeString(s)
	copy(h[:], b)
	return h, err
}

func TestMonitorLoop(t *testing.T) {
	e := newEnv(t)
	e.addRun(false)
	f, srv := e.serve(e.j)
	state := filepath.Join(t.TempDir(), "state")
	tr, err := (&trustFlags{logKeys: []string{"@" + filepath.Join(e.dir, "log.vkey")},
		witnesses: []string{"@" + filepath.Join(e.dir, "w1.vkey"), "@" + filepath.Join(e.dir, "w2.vkey")}}).load()
	if err != nil {
		t.Fatal(err)
	}
	c, err := api.NewClient(srv, api.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tr.follower(c, state)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := &app{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	metrics := monitor.NewMetrics()
	report := func(res monitor.Result) { metrics.Observe(res, time.Now()) }
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- a.runMonitor(ctx, m, metrics, 20*time.Millisecond, "", report) }()
	// Metrics count what happened; wait for them rather than for a time,
	// since a loaded machine may run the loop late.
	metricsShow := func(want ...string) {
		t.Helper()
		var body string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			rec := httptest.NewRecorder()
			metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			body = rec.Body.String()
			all := true
			for _, w := range want {
				all = all && strings.Contains(body, w)
			}
			if all {
				return
			}
		}
		t.Fatalf("metrics never showed %q:\n%s", want, body)
	}
	metricsShow(`runseal_monitor_checks_total{result="started"} 1`, "runseal_monitor_verified_size 1")
	e.addRun(false)
	metricsShow(`runseal_monitor_checks_total{result="advanced"} 1`, "runseal_monitor_verified_size 2")
	// A fork ends the loop with its own code.
	f.mu.Lock()
	j := forked(t, e, 0)
	saved := e.j
	e.j = j
	for range 4 {
		e.addRun(false)
	}
	e.j = saved
	f.j = j
	f.mu.Unlock()
	select {
	case err := <-done:
		var ee *command.ExitError
		if !errors.As(err, &ee) || ee.Code != exitFork {
			t.Fatalf("loop ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not stop on a fork")
	}
	// Cancelling ends a loop cleanly.
	f.mu.Lock()
	f.j = e.j
	f.mu.Unlock()
	m2, err := tr.follower(c, filepath.Join(t.TempDir(), "s2"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- a.runMonitor(ctx2, m2, metrics, 20*time.Millisecond, "", report) }()
	cancel2()
	if err := <-done; err != nil {
		t.Fatalf("cancelled loop: %v", err)
	}
}

func TestMonitorUsage(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		e.args("monitor", "http://x"),
		e.args("monitor", "ftp://x", "--state", t.TempDir()),
		e.args("monitor", "http://x", "--state", t.TempDir(), "--interval", "1ms"),
	} {
		if code, _, _ := cli(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d", args, code)
		}
	}
	// Two monitors never share a state directory.
	state := t.TempDir()
	other, err := monitor.Open(monitor.Config{Source: &monitor.TilesSource{}, Dir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if code, _, errOut := cli(t, e.args("monitor", "http://127.0.0.1:1", "--state", state, "--once")...); code != exitUnverifiable || !strings.Contains(errOut, "another monitor") {
		t.Errorf("locked state: %d %s", code, errOut)
	}
}
