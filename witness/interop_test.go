package witness

import (
	"bytes"
	"context"
	"testing"

	flog "github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/internal/journaltest"
)

// TestInteropAnswerVerifiesWithFormats checks the witness's answer and its
// monitoring read with transparency-dev/formats and x/mod, the libraries
// other logs' publishers and monitors use, not with this module's code: a
// client may append the 200 body to its note and verify the result.
func TestInteropAnswerVerifiesWithFormats(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/interop")
	e.addLog(l)
	l.Tree.Grow(21)
	msg := l.Note(t, 21, nil)
	lines, err := e.client.AddCheckpoint(context.Background(), 0, nil, msg)
	if err != nil {
		t.Fatal(err)
	}
	logV, err := note.NewVerifier(l.VKey)
	if err != nil {
		t.Fatal(err)
	}
	wv, err := fnote.NewVerifierForCosignatureV1(e.cosign.Verifier().String())
	if err != nil {
		t.Fatal(err)
	}
	cosigned := append(bytes.Clone(msg), lines...)
	cp, _, n, err := flog.ParseCheckpoint(cosigned, l.Origin, logV, wv)
	if err != nil {
		t.Fatalf("formats ParseCheckpoint of note + answer: %v", err)
	}
	root := l.Tree.Root(21)
	if cp.Size != 21 || !bytes.Equal(cp.Hash, root[:]) || len(n.Sigs) != 2 {
		t.Fatalf("formats parsed %+v with %d signatures", cp, len(n.Sigs))
	}
	ts, err := fnote.CoSigV1Timestamp(n.Sigs[1])
	if err != nil || !ts.Equal(e.clock.Now()) {
		t.Errorf("formats cosignature time %v %v, want %v", ts, err, e.clock.Now())
	}
	// The monitoring read opens with x/mod's note.Open and both keys.
	got, err := e.client.LatestCheckpoint(context.Background(), l.Origin)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := note.Open(got, note.VerifierList(logV, wv)); err != nil || len(n.Sigs) != 2 || len(n.UnverifiedSigs) != 0 {
		t.Fatalf("x/mod note.Open of the monitoring read: %v", err)
	}
}
