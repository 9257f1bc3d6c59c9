// Package verifyfuzz_test holds FuzzVerify in a test binary of its own.
//
// It lives outside package disclosure on purpose: go test -fuzz instruments
// every package linked into the test binary for coverage, and disclosure's
// own tests link modernc.org/sqlite (a transpiled C library of millions of
// basic blocks) to build journals. Fuzzing Verify there ran at about 0
// executions per second: each input paid for scanning and diffing the
// coverage counters of all of SQLite. Here the binary links only the
// verifier and its dependencies, and the seeds are the spec's genuine
// package vector and its tampered variants, read from spec/vectors.
package verifyfuzz_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/disclosure/internal/tamper"
)

const (
	vecPackage = "../../../spec/vectors/disclosure-package.jsonl"
	vecJSON    = "../../../spec/vectors/disclosure.json"
)

// vectors is the part of spec/vectors/disclosure.json the fuzz target needs:
// the keys, the policy and the tampered variants of the package vector
// (edits to its lines, numbered from 1 as in the original file).
type vectors struct {
	LogKey        string `json:"log_key"`
	Policy        string `json:"policy"`
	DisclosureKey string `json:"disclosure_key"`
	Tampered      []struct {
		Name  string        `json:"name"`
		Edits []tamper.Edit `json:"edits"`
	} `json:"tampered"`
}

// seeds returns the genuine package vector, its tampered variants and the
// verifier options that make the genuine one sound.
func seeds(t testing.TB) (genuine []byte, tampered [][]byte, opts disclosure.Options) {
	t.Helper()
	b, err := os.ReadFile(vecJSON)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectors
	if err := json.Unmarshal(b, &vf); err != nil {
		t.Fatal(err)
	}
	if genuine, err = os.ReadFile(vecPackage); err != nil {
		t.Fatal(err)
	}
	for _, c := range vf.Tampered {
		out, err := tamper.Apply(genuine, c.Edits)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		tampered = append(tampered, out)
	}
	p, err := checkpoint.ParsePolicy([]byte(vf.Policy))
	if err != nil {
		t.Fatal(err)
	}
	logs, err := disclosure.MergeLogKeys([]string{vf.LogKey}, p)
	if err != nil {
		t.Fatal(err)
	}
	dv, err := checkpoint.NewVerifier(vf.DisclosureKey)
	if err != nil {
		t.Fatal(err)
	}
	return genuine, tampered, disclosure.Options{Logs: logs, Policy: p, Disclosure: []note.Verifier{dv}}
}

// The seeds reach the verifier's checks: the genuine package is sound and
// every tampered variant is not, so the fuzzer starts from inputs that pass
// the signature and proof checks rather than from noise the header refuses.
func TestSeedsReachTheChecks(t *testing.T) {
	genuine, tampered, opts := seeds(t)
	rep, err := disclosure.Verify(context.Background(), bytes.NewReader(genuine), opts)
	if err != nil || rep.Verdict != disclosure.Sound {
		t.Fatalf("genuine vector: %v %+v", err, rep)
	}
	if len(tampered) < 10 {
		t.Fatalf("only %d tampered seeds", len(tampered))
	}
	for i, in := range tampered {
		rep, err := disclosure.Verify(context.Background(), bytes.NewReader(in), opts)
		if err != nil || rep.Verdict == disclosure.Sound {
			t.Fatalf("tampered seed %d: %v, verdict %s", i, err, rep.Verdict)
		}
	}
}

// Verify never panics or fails to answer on any input, its verdict agrees
// with its findings, and whatever input it calls sound carries no sealed run
// block the genuine package does not: a leaf cannot be forged.
func FuzzVerify(f *testing.F) {
	genuine, tampered, opts := seeds(f)
	known := map[string]bool{}
	for _, l := range tamper.Lines(genuine) {
		known[string(l)] = true
	}
	f.Add(genuine)
	for _, in := range tampered {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rep, err := disclosure.Verify(context.Background(), bytes.NewReader(in), opts)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		switch rep.Verdict {
		case disclosure.Sound:
			if len(rep.Findings) > 0 || len(rep.Unverifiable) > 0 || !rep.Complete {
				t.Fatalf("sound with findings or incomplete: %+v", rep)
			}
			for _, l := range tamper.Lines(in) {
				if bytes.HasPrefix(l, []byte(`{"index":`)) && !known[string(l)] {
					t.Fatalf("a sealed run block not in the genuine package verified: %q", l)
				}
			}
		case disclosure.NotSound:
			if len(rep.Findings) == 0 && rep.FindingsOmitted == 0 {
				t.Fatal("not sound without a finding")
			}
		case disclosure.Unverifiable:
			if len(rep.Findings) > 0 || len(rep.Unverifiable) == 0 {
				t.Fatalf("unverifiable with findings or without a reason: %+v", rep)
			}
		default:
			t.Fatalf("verdict %q", rep.Verdict)
		}
	})
}
