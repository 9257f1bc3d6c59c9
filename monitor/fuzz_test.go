package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
)

// fuzzSource serves fixed bytes: a note, and a proof cut from raw bytes.
type fuzzSource struct {
	note, at []byte
	proof    []store.Digest
}

func (s *fuzzSource) Witnessed(context.Context) ([]byte, error) { return s.note, nil }
func (s *fuzzSource) Consistency(context.Context, uint64, uint64) ([]store.Digest, error) {
	return s.proof, nil
}
func (s *fuzzSource) CheckpointAt(context.Context, uint64) ([]byte, error) {
	if s.at == nil {
		return nil, fmt.Errorf("none")
	}
	return s.at, nil
}
func (s *fuzzSource) Base() string { return "fuzz://log" }

// FuzzFollowerCheck feeds a follower that saved a genuine checkpoint of
// size 4 with arbitrary served notes and proofs. Whatever it is served, it
// never panics, saves only a checkpoint that verifies, and calls a fork
// only with evidence whose two notes both verify with the log's key: a
// verdict never rests on bytes the log did not sign.
func FuzzFollowerCheck(f *testing.F) {
	l, opts := newFakeLog(f)
	a := &tree{}
	a.grow(f, 4, "a")
	l.use(a)
	saved := l.signed[4]
	a.grow(f, 3, "a")
	l.use(a)
	grown := l.signed[7]
	proof, _ := l.Consistency(context.Background(), 4, 7)
	var raw []byte
	for _, d := range proof {
		raw = append(raw, d[:]...)
	}
	b := &tree{}
	b.grow(f, 4, "b")
	l.use(b)
	other := l.signed[4]
	f.Add(grown, raw, []byte(nil))
	f.Add(other, []byte(nil), []byte(nil))
	f.Add(grown, raw[:len(raw)-1], saved)
	f.Add([]byte("example.com/monitor-test\n9\nAAAA\n\n"), raw, other)
	f.Fuzz(func(t *testing.T, note, proofBytes, at []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(dir+"/"+StateFile, saved, 0o600); err != nil {
			t.Fatal(err)
		}
		src := &fuzzSource{note: note, at: at}
		for len(proofBytes) >= 32 && len(src.proof) < 64 {
			src.proof = append(src.proof, store.Digest(proofBytes[:32]))
			proofBytes = proofBytes[32:]
		}
		m, err := Open(Config{Source: src, Trust: opts, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		res := m.Check(context.Background())
		st, err := os.ReadFile(dir + "/" + StateFile)
		if err != nil {
			t.Fatal(err)
		}
		if nc := disclosure.CheckNote(st, opts); nc.Verdict() != disclosure.Sound {
			t.Fatalf("%s: the saved state no longer verifies", res.Outcome)
		}
		if res.Outcome != Fork {
			return
		}
		evb, err := os.ReadFile(res.Evidence)
		if err != nil {
			t.Fatalf("fork without evidence: %v", err)
		}
		var ev Evidence
		if err := json.Unmarshal(evb, &ev); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{ev.Saved.Note, ev.Served.Note} {
			if nc := disclosure.CheckNote([]byte(n), opts); !nc.Report.LogSigned {
				t.Fatalf("fork evidence holds a note the log did not sign: %q", n)
			}
		}
	})
}
