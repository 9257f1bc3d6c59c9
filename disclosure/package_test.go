package disclosure

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
)

func TestPackageRoundTrip(t *testing.T) {
	w := newWorld(t)
	sel := Selection{Runs: []store.RunID{w.C, w.A}, Cases: []store.CaseID{w.X}}
	var buf bytes.Buffer
	sum, err := WritePackage(context.Background(), w.j, &buf, sel, w.signed(t), w.k.signing())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Runs != 3 || sum.Sealed != 2 || sum.Cases != 1 || sum.Records != 5+3+3 || sum.Bytes != int64(buf.Len()) || sum.SHA256 != store.Sum(buf.Bytes()) {
		t.Fatalf("summary %+v", sum)
	}
	rep := verifyBytes(t, buf.Bytes(), w.k.options())
	mustSound(t, rep)
	if !rep.Complete || rep.Counts.Runs != 3 || rep.Counts.Sealed != 2 || rep.Counts.Unsealed != 1 || rep.Counts.Records != 11 || rep.Counts.Cases != 1 {
		t.Fatalf("report %+v", rep)
	}
	if rep.SHA256 != sum.SHA256.String() || !rep.Checkpoint.Verified || len(rep.Checkpoint.Witnesses) != 2 {
		t.Fatalf("report %+v %+v", rep, rep.Checkpoint)
	}
	if len(rep.Proven) < 4 || len(rep.NotChecked) == 0 || !strings.Contains(strings.Join(rep.NotChecked, " "), "unsealed") {
		t.Fatalf("proven %q not checked %q", rep.Proven, rep.NotChecked)
	}
	// Every line is canonical JSON, so it has one spelling.
	for i, l := range lines(buf.Bytes()) {
		if _, err := parseObject(bytes.TrimSuffix(l, []byte("\n"))); err != nil {
			t.Errorf("line %d is not canonical: %v", i+1, err)
		}
	}
}

func TestPackageSelections(t *testing.T) {
	w := newWorld(t)
	for name, tc := range map[string]struct {
		sel                 Selection
		runs, sealed, cases uint64
	}{
		"one sealed run":           {Selection{Runs: []store.RunID{w.A}}, 1, 1, 0},
		"unsealed only":            {Selection{Runs: []store.RunID{w.C, w.E}}, 2, 0, 0},
		"by case":                  {Selection{Cases: []store.CaseID{w.X}}, 2, 2, 1},
		"two cases":                {Selection{Cases: []store.CaseID{w.Y, w.X}}, 3, 3, 2},
		"case and overlapping run": {Selection{Runs: []store.RunID{w.B, w.B}, Cases: []store.CaseID{w.X}}, 2, 2, 1},
		"everything":               {Selection{Runs: []store.RunID{w.A, w.B, w.C, w.D, w.E}, Cases: []store.CaseID{w.X, w.Y}}, 5, 3, 2},
	} {
		t.Run(name, func(t *testing.T) {
			rep := verifyBytes(t, w.pkg(t, tc.sel), w.k.options())
			mustSound(t, rep)
			if c := rep.Counts; c.Runs != tc.runs || c.Sealed != tc.sealed || c.Cases != tc.cases {
				t.Fatalf("counts %+v", c)
			}
		})
	}
}

func TestPackageAgainstEmptyLog(t *testing.T) {
	j := openJournal(t, testOrigin)
	k := newKeys(t, testOrigin, 2)
	r := runID(1)
	appendAll(t, j, 1, noteRec(r, store.CaseID{}, "x"))
	cp, _ := j.Checkpoint(context.Background())
	var buf bytes.Buffer
	if _, err := WritePackage(context.Background(), j, &buf, Selection{Runs: []store.RunID{r}}, k.sign(t, cp), k.signing()); err != nil {
		t.Fatal(err)
	}
	mustSound(t, verifyBytes(t, buf.Bytes(), k.options()))
}

func TestWritePackageRefuses(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	old := w.signed(t)
	var sel *SelectionError
	var mm *CheckpointMismatchError
	var up *UnplacedRunError
	write := func(s Selection, cp *checkpoint.Signed) error {
		_, err := WritePackage(ctx, w.j, &bytes.Buffer{}, s, cp, w.k.signing())
		return err
	}
	if err := write(Selection{}, old); !errors.As(err, &sel) {
		t.Errorf("empty selection: %v", err)
	}
	if err := write(Selection{Runs: []store.RunID{runID(0x77)}}, old); !errors.As(err, &sel) {
		t.Errorf("unknown run: %v", err)
	}
	if err := write(Selection{Cases: []store.CaseID{caseID(0x77)}}, old); !errors.As(err, &sel) {
		t.Errorf("unknown case: %v", err)
	}
	if err := write(Selection{Runs: []store.RunID{w.A}}, nil); !errors.As(err, &mm) {
		t.Errorf("no checkpoint: %v", err)
	}

	// A checkpoint of another journal, of a size the log has not reached,
	// or with another root.
	other := newWorld(t)
	if _, err := other.j.Seal(ctx, other.C, 3, "failed"); err == nil {
		t.Fatal("sealing a failed run")
	}
	appendAll(t, other.j, 3, conclude(other.C, "succeeded"))
	seal(t, other.j, other.C, 3, "succeeded")
	if err := write(Selection{Runs: []store.RunID{w.A}}, other.signed(t)); !errors.As(err, &mm) {
		t.Errorf("checkpoint of a larger log: %v", err)
	}
	cp, _ := w.j.Checkpoint(ctx)
	cp.Root[0] ^= 1
	if err := write(Selection{Runs: []store.RunID{w.A}}, w.k.sign(t, cp)); !errors.As(err, &mm) {
		t.Errorf("checkpoint with another root: %v", err)
	}
	cp, _ = w.j.Checkpoint(ctx)
	cp.Size--
	if err := write(Selection{Runs: []store.RunID{w.A}}, w.k.sign(t, cp)); !errors.As(err, &mm) {
		t.Errorf("checkpoint with a smaller size but the current root: %v", err)
	}
	k2 := newKeys(t, "example.com/elsewhere", 3)
	cp, _ = w.j.Checkpoint(ctx)
	cp.Origin = "example.com/elsewhere"
	if err := write(Selection{Runs: []store.RunID{w.A}}, k2.sign(t, cp)); !errors.As(err, &mm) {
		t.Errorf("checkpoint of another origin: %v", err)
	}

	// C concludes with a sealing outcome but is not sealed: its block would
	// look stripped of its leaf.
	appendAll(t, w.j, 3, conclude(w.C, "succeeded"))
	if err := write(Selection{Runs: []store.RunID{w.C}}, old); !errors.As(err, &up) || up.Index != nil {
		t.Errorf("seal pending: %v", err)
	}
	// Sealed after the checkpoint: a newer checkpoint is needed.
	seal(t, w.j, w.C, 3, "succeeded")
	if err := write(Selection{Runs: []store.RunID{w.C}}, old); !errors.As(err, &up) || up.Index == nil || *up.Index != 3 {
		t.Errorf("sealed after the checkpoint: %v", err)
	}
	// Against the newer checkpoint it is written, and the old checkpoint
	// still serves the runs sealed before it: proofs are at its size.
	var buf bytes.Buffer
	if _, err := WritePackage(ctx, w.j, &buf, Selection{Runs: []store.RunID{w.C}}, w.signed(t), w.k.signing()); err != nil {
		t.Fatal(err)
	}
	mustSound(t, verifyBytes(t, buf.Bytes(), w.k.options()))
	buf.Reset()
	if _, err := WritePackage(ctx, w.j, &buf, Selection{Runs: []store.RunID{w.A, w.B}}, old, w.k.signing()); err != nil {
		t.Fatal(err)
	}
	mustSound(t, verifyBytes(t, buf.Bytes(), w.k.options()))
}

func TestVerifyKeysAndPolicy(t *testing.T) {
	w := newWorld(t)
	b := w.pkg(t, Selection{Runs: []store.RunID{w.A}})
	other := newKeys(t, testOrigin, 9)
	for name, tc := range map[string]struct {
		opts Options
		want Verdict
	}{
		"no keys":            {Options{}, Unverifiable},
		"log key, no policy": {Options{Logs: []note.Verifier{w.k.logV}}, Unverifiable},
		"another log key":    {Options{Logs: []note.Verifier{other.logV}, Policy: w.k.policy}, Unverifiable},
		"other witnesses":    {Options{Logs: []note.Verifier{w.k.logV}, Policy: other.policy}, Unverifiable},
		"right keys":         {w.k.options(), Sound},
		"no disclosure key":  {Options{Logs: []note.Verifier{w.k.logV}, Policy: w.k.policy}, Unverifiable},
		"another disclosure key": {Options{Logs: []note.Verifier{w.k.logV}, Policy: w.k.policy,
			Disclosure: []note.Verifier{other.discV}}, Unverifiable},
		// Key separation: the log key offered as the disclosure key checks
		// nothing, even beside the right one.
		"log key as disclosure key": {Options{Logs: []note.Verifier{w.k.logV}, Policy: w.k.policy,
			Disclosure: []note.Verifier{w.k.discV, w.k.logV}}, Unverifiable},
	} {
		t.Run(name, func(t *testing.T) {
			rep := verifyBytes(t, b, tc.opts)
			if rep.Verdict != tc.want {
				t.Fatalf("verdict %s: %s", rep.Verdict, summary(rep))
			}
		})
	}
	// quorum none accepts an unwitnessed checkpoint deliberately.
	none, err := checkpoint.ParsePolicy([]byte("quorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	mustSound(t, verifyBytes(t, b, Options{Logs: []note.Verifier{w.k.logV}, Policy: none, Disclosure: []note.Verifier{w.k.discV}}))
}

func TestVerifyOtherFiles(t *testing.T) {
	w := newWorld(t)
	var exp bytes.Buffer
	if _, err := Export(context.Background(), w.j, &exp); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"empty":      "",
		"export":     exp.String(),
		"newer":      `{"kind":"runseal.disclosure","version":2}` + "\n",
		"foreign":    `{"kind":"something.else","version":1}` + "\n",
		"cut header": `{"kind":"runseal.disclosure"`,
	} {
		rep := verifyBytes(t, []byte(in), w.k.options())
		if rep.Verdict != Unverifiable {
			t.Errorf("%s: %s", name, summary(rep))
		}
	}
	for name, in := range map[string]string{
		"not json":     "hello\n",
		"no version":   `{"kind":"runseal.disclosure"}` + "\n",
		"record first": `{"hash":"00","raw":{}}` + "\n",
	} {
		rep := verifyBytes(t, []byte(in), w.k.options())
		if rep.Verdict != NotSound {
			t.Errorf("%s: %s", name, summary(rep))
		}
	}
}

// A verification waiting on input that never comes ends with its context.
func TestVerifyCancelledWhileWaiting(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	reads := make(chan struct{}, 8)
	go func() {
		_, err := Verify(ctx, signalReader{pr, reads}, Options{})
		done <- err
	}()
	pw.Write([]byte(`{"canon":1,`))
	// The first read took those bytes; the second waits for more.
	<-reads
	<-reads
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Verify = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Verify did not return after its context ended")
	}
}

// signalReader sends on reads as each Read of r begins, so that a test
// knows its reader is waiting for input.
type signalReader struct {
	r     io.Reader
	reads chan<- struct{}
}

func (s signalReader) Read(p []byte) (int, error) {
	s.reads <- struct{}{}
	return s.r.Read(p)
}
