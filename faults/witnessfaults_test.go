package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api/server"
)

// status reads GET /v1/status, what the console's Log page shows.
func (s *served) status(t *testing.T, token string) server.LogStatus {
	t.Helper()
	var st server.LogStatus
	b := s.get(t, "/v1/status", token)
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("status: %v: %s", err, b)
	}
	return st
}

func (s *served) get(t *testing.T, path, token string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// metric returns the value of the first sample of name whose labels
// contain label, or -1.
func (s *served) metric(t *testing.T, token, name, label string) float64 {
	t.Helper()
	for _, l := range strings.Split(string(s.get(t, "/metrics", token)), "\n") {
		if strings.HasPrefix(l, name+"{") && strings.Contains(l, label) {
			v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// witnessNamed returns the status of the policy's witness named name.
func witnessNamed(t *testing.T, st server.LogStatus, name string) server.WitnessStatus {
	t.Helper()
	for _, w := range st.Witnesses {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("status has no witness %s: %+v", name, st.Witnesses)
	return server.WitnessStatus{}
}

// until polls cond every 20ms until it holds, failing t after timeout.
func until(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
	}
}

// checkBackoff fails t unless the requests at times, after the first
// settle, came at least floor apart: the publisher waited its capped
// backoff between attempts, however many checkpoints were signed meanwhile.
func checkBackoff(t *testing.T, times []time.Time, settle int, floor time.Duration) {
	t.Helper()
	for i := settle + 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < floor {
			t.Errorf("attempt %d came %v after the one before; the backoff is at least %v by then (all: %v)", i+1, gap, floor, gaps(times))
			return
		}
	}
}

func gaps(times []time.Time) []string {
	var out []string
	for i := 1; i < len(times); i++ {
		out = append(out, times[i].Sub(times[i-1]).Round(time.Millisecond).String())
	}
	return out
}

// TestFault_WitnessDownHangsSlowGarbage puts a faulty relay in front of
// one of two real witnesses (policy: both must cosign) under a serve that
// signs after every seal while writers seal continuously, and makes it
// disappear, answer garbage, answer slowly and hang in turn. Must hold:
// the publisher backs off (capped, not reset by every new checkpoint),
// the healthy witness keeps cosigning, nothing unverified is kept, the
// status (the console's Log page) and the metrics show the failing witness
// with its attempts and last error, and once the witness behaves the
// publisher catches up to the newest checkpoint; the log verifies.
func TestFault_WitnessDownHangsSlowGarbage(t *testing.T) {
	campaign(t)
	const origin = "example.com/faults/witness"
	db, token, logKey := newSignedJournal(t, origin)
	w0 := newWitness(t, "w0.example", origin, logKey)
	w1 := newWitness(t, "w1.example", origin, logKey)
	bad := newFaultyWitness(t, w1.addr)
	// The policy reaches w1 through the relay.
	direct := w1.addr
	w1.addr = bad.addr
	policy := writePolicy(t, logKey, w0, w1)
	w1.addr = direct
	const retryMax = 320 * time.Millisecond
	srv := serve(t, db, token, "--policy", policy, "--checkpoint-every", "1", "--checkpoint-interval", "50ms",
		"--retry-min", "20ms", "--retry-max", retryMax.String(), "--publish-poll", "50ms")
	got, seen := newAcks(), newWatcher()
	stop := load(t, srv, 2, got, seen)
	defer func() { stop() }()
	ctx := context.Background()

	witnessed := func() uint64 {
		n, err := srv.client.Witnessed(ctx)
		if err != nil {
			return 0
		}
		return sizeOf(t, body(n))
	}
	signed := func() uint64 {
		n, err := srv.client.Checkpoint(ctx)
		if err != nil {
			return 0
		}
		return sizeOf(t, body(n))
	}
	// catchUp waits until w1 cosigned at least what was signed now.
	catchUp := func(phase string) {
		t.Helper()
		var target uint64
		until(t, phase+": a checkpoint is signed", 30*time.Second, func() bool { target = signed(); return target > 0 })
		until(t, phase+": w1 catches up to size "+fmt.Sprint(target), 90*time.Second, func() bool {
			return witnessNamed(t, srv.status(t, token), "w1").LastCosigned >= target
		})
		until(t, phase+": size "+fmt.Sprint(target)+" witnessed", 30*time.Second, func() bool { return witnessed() >= target })
	}
	catchUp("start")

	type phase struct {
		name    string
		mode    int
		wantErr *regexp.Regexp // in the status's last error for w1
	}
	for _, ph := range []phase{
		{"down", down, regexp.MustCompile(`refused`)},
		{"garbage", garbage, regexp.MustCompile(`valid cosignature|size`)},
		{"hang", hang, regexp.MustCompile(`Timeout|deadline`)},
	} {
		w0Before := witnessNamed(t, srv.status(t, token), "w0").LastCosigned
		failsBefore := srv.metric(t, token, "runseal_publisher_failures_total", `witness="w1.example+`)
		bad.set(ph.mode)
		var ws server.WitnessStatus
		var before *uint64 // w1's cosigned size once it was seen failing
		// Down for many attempts: with a 320ms cap, 12 attempts stand for
		// an hour of a 5 minute cap.
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			ws = witnessNamed(t, srv.status(t, token), "w1")
			need := 12
			if ph.mode == hang {
				need = 1 // each attempt waits out the client's 30s timeout
			}
			failing := ws.Pending != nil && ws.Pending.Attempts >= 1 && ph.wantErr.MatchString(ws.Pending.LastError)
			if failing && before == nil {
				before = &ws.LastCosigned
			}
			if failing && ws.Pending.Attempts >= need {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the status never showed w1 failing %d attempts running with a last error matching %s; last: %+v, pending %+v; requests at the relay %v",
					ph.name, need, ph.wantErr, ws, ws.Pending, gaps(bad.requests()))
			}
		}
		st := srv.status(t, token)
		ws = witnessNamed(t, st, "w1")
		t.Logf("%s: w1 pending size %d, %d attempts, lag %d entries, last error %q", ph.name, ws.Pending.Size, ws.Pending.Attempts, ws.LagEntries, ws.Pending.LastError)
		if ws.LastCosigned != *before {
			t.Errorf("%s: w1's cosigned size moved from %d to %d while it failed", ph.name, *before, ws.LastCosigned)
		}
		if ws.LagEntries == 0 {
			t.Errorf("%s: the status shows no lag for a failing witness", ph.name)
		}
		if w := witnessNamed(t, st, "w0").LastCosigned; w <= w0Before {
			t.Errorf("%s: the healthy witness w0 stopped cosigning (at %d)", ph.name, w)
		}
		if st.Witnessed != nil && st.Witnessed.Size > ws.LastCosigned {
			t.Errorf("%s: size %d marked witnessed without w1's cosignature (w1 at %d)", ph.name, st.Witnessed.Size, ws.LastCosigned)
		}
		if f := srv.metric(t, token, "runseal_publisher_failures_total", `witness="w1.example+`); f <= failsBefore {
			t.Errorf("%s: runseal_publisher_failures_total for w1 did not grow (%v, was %v)", ph.name, f, failsBefore)
		}
		if ph.mode != down && ph.mode != hang {
			checkBackoff(t, bad.requests(), 6, retryMax/2)
		}
		bad.set(pass)
		catchUp(ph.name)
	}

	// Slow: answers take a second; publication goes on, late.
	bad.set(slow)
	catchUp("slow")
	bad.set(pass)

	stop()
	stop = func() {}
	catchUp("end")
	srv.kill()
	checkSQLite(t, db, got, seen, origin, w0, w1)
	verifyAll(t, db)
}
