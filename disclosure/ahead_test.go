package disclosure

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/runseal/runseal/internal/benchjournal"
	"github.com/runseal/runseal/store"
)

// smallPackage writes a genuine package of a few kilobytes (one read-ahead
// chunk: the workers examine every record line in it).
func smallPackage(t testing.TB) ([]byte, Options) {
	t.Helper()
	j, err := benchjournal.New(benchjournal.Spec{Origin: testOrigin, Runs: 6, RecordsPerRun: 4, PayloadBytes: 40, UnsealedEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeys(t, testOrigin, 13)
	cp, _ := j.Checkpoint(context.Background())
	var buf bytes.Buffer
	if _, err := WritePackage(context.Background(), j, &buf, Selection{Cases: []store.CaseID{j.Case}}, k.sign(t, cp), k.signing()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), k.options()
}

// checkAheadAgrees verifies in twice: with the workers that parse and check
// record lines ahead (their line ends, parses, body checks and chain
// hashes taken by the verifier) and with none (every line parsed and
// checked by the verifier itself). The reports must be the same, finding
// for finding: the fast path refuses exactly what the slow one refuses.
func checkAheadAgrees(t *testing.T, in []byte, opts Options) *Report {
	t.Helper()
	ahead, aerr := verifyWith(context.Background(), bytes.NewReader(in), opts, &examiner{filter: opts.RecordFilter})
	inline, ierr := verifyWith(context.Background(), bytes.NewReader(in), opts, nil)
	if (aerr == nil) != (ierr == nil) || !reflect.DeepEqual(ahead.rep, inline.rep) {
		t.Fatalf("%q:\nwith workers %v %s\nwithout      %v %s", in, aerr, summary(ahead.rep), ierr, summary(inline.rep))
	}
	return ahead.rep
}

// Every kind of damage to a record line (a changed letter, a quote, a
// backslash, a control byte, a byte above 0x7f, a newline, a deleted byte)
// in every position of every record line of a package: the verifier with
// its workers reports what it reports without them.
func TestVerify_AheadAgreesWithInline(t *testing.T) {
	pkg, opts := smallPackage(t)
	if rep := checkAheadAgrees(t, pkg, opts); rep.Verdict != Sound {
		t.Fatalf("genuine package: %s", summary(rep))
	}
	tried, notSound, first := 0, 0, -1
	off := 0
	for li, l := range lines(pkg) {
		start := off
		off += len(l)
		if !bytes.HasPrefix(l, recordLinePrefix) {
			continue
		}
		if first < 0 {
			first = li
		}
		for p := range len(l) - 1 {
			// Every position of the first record line, a stride through
			// the rest.
			if li != first && p%29 != li%29 {
				continue
			}
			for _, b := range []byte{l[p] ^ 0x20, '"', '\\', 0x01, 0xc3, '\n', 0} {
				var mut []byte
				if b == 0 {
					mut = append(bytes.Clone(pkg[:start+p]), pkg[start+p+1:]...)
				} else {
					mut = bytes.Clone(pkg)
					mut[start+p] = b
				}
				if checkAheadAgrees(t, mut, opts).Verdict == NotSound {
					notSound++
				}
				tried++
			}
		}
	}
	t.Logf("%d changes tried, %d not sound", tried, notSound)
	if tried < 500 || notSound < tried/2 {
		t.Fatalf("%d changes tried, %d not sound", tried, notSound)
	}
}

// FuzzVerifyAheadAgreesWithInline is TestVerify_AheadAgreesWithInline on
// any input.
func FuzzVerifyAheadAgreesWithInline(f *testing.F) {
	pkg, opts := smallPackage(f)
	f.Add(pkg)
	ls := lines(pkg)
	f.Add(bytes.Join(ls[:3], nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkAheadAgrees(t, in, opts)
	})
}
