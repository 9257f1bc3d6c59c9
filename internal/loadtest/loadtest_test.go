package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
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
