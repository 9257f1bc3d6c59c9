package disclosure

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/store"
)

// recordSeeds are raw bodies from spec/vectors/records.json, valid and not.
func recordSeeds(t testing.TB) [][]byte {
	b, err := os.ReadFile("../spec/vectors/records.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Records []struct {
			Canonical string `json:"canonical"`
		} `json:"records"`
		Invalid []struct {
			Raw string `json:"raw"`
		} `json:"invalid_bodies"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range v.Records {
		out = append(out, []byte(r.Canonical))
	}
	for _, r := range v.Invalid {
		out = append(out, []byte(r.Raw))
	}
	if len(out) < 5 {
		t.Fatalf("only %d record seeds", len(out))
	}
	return out
}

// The fast body decoder must agree with store.DecodeBody (and, for the
// kinds the store reads, store.ReadFacts) on every input.
func FuzzDecodeRecordBody(f *testing.F) {
	for _, s := range recordSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte(`{"epoch":1,"kind":"RunConcluded","outcome":"succeeded","run":"01JC000000000000000000000A","seq":5,"v":1}`))
	f.Add([]byte(`{"epoch":1,"kind":"RunConcluded","outcome":"Succeeded","run":"01JC000000000000000000000A","seq":5,"v":1}`))
	f.Add([]byte(`{"epoch":1,"kind":"Note","run":"01JC000000000000000000000A","seq":5,"text":{"seq":"x"},"v":1}`))
	// Integers at the edges of their widths, where bodyUint's own digit
	// loop hands over to strconv (more than 19 digits).
	for _, m := range []string{`"seq":9999999999999999999`, `"seq":18446744073709551615`, `"seq":18446744073709551616`,
		`"seq":1,"step":4294967295`, `"seq":1,"step":4294967296`} {
		f.Add([]byte(`{"epoch":1,"kind":"Note","run":"01JC000000000000000000000A",` + m + `,"v":1}`))
	}
	f.Add([]byte(`{"epoch":1,"kind":"Note","run":"01JC000000000000000000000A","seq":1,"v":65537}`))
	f.Add([]byte(`{"epoch":4611686018427387905,"kind":"Note","run":"01JC000000000000000000000A","seq":1,"v":1}`))
	var cache bodyCache // warmed by earlier inputs: it must change no result
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, gotFacts, err := decodeRecordBody(raw)
		cgot, cfacts, cerr := decodeRecordBodyCached(raw, &cache)
		if (err == nil) != (cerr == nil) || !reflect.DeepEqual(got, cgot) || !reflect.DeepEqual(gotFacts, cfacts) {
			t.Fatalf("decodeRecordBody(%q) with a cache = %+v %v, without %+v %v", raw, cgot, cerr, got, err)
		}
		want, werr := store.DecodeBody(raw)
		if werr == nil {
			werr = store.CheckBodyRules(want)
		}
		var wantFacts store.Facts
		if werr == nil && storeReadKind(want.Kind) {
			wantFacts, werr = store.ReadFacts(want)
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("decodeRecordBody(%q) = %v, reference = %v", raw, err, werr)
		}
		if err != nil {
			return
		}
		if !storeReadKind(want.Kind) {
			want.Fields, got.Fields = nil, nil // not returned for opaque kinds
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotFacts, wantFacts) {
			t.Fatalf("decodeRecordBody(%q) = %+v %+v, reference %+v %+v", raw, got, gotFacts, want, wantFacts)
		}
	})
}

// Every framing line the parsers accept has one spelling: re-encoding what
// was parsed gives the same bytes.
func FuzzParseLine(f *testing.F) {
	// Seeds come from the vector files: fuzz workers build no journal
	// (SQLite under coverage instrumentation is too slow to set up).
	_, pkg, exp := loadVectors(f)
	for _, l := range append(lines(pkg), lines(exp)...) {
		f.Add(bytes.TrimSuffix(l, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		full := append(bytes.Clone(line), '\n')
		for _, k := range []struct {
			kind  string
			proof bool
		}{{KindPackageRun, true}, {KindExportRun, false}} {
			var blk runBlock
			if parseRunBlock(line, k.kind, k.proof, &blk) == nil {
				if got := appendRunBlock(nil, k.kind, &blk, k.proof); !bytes.Equal(got, full) {
					t.Fatalf("run block %q re-encodes as %q", line, got)
				}
				if !isRunBlock(line, k.kind) {
					t.Fatalf("run block %q not recognized as one", line)
				}
			}
		}
		if h, raw, err := parseRecordLine(line); err == nil {
			if got := appendRecordLine(nil, h, raw); !bytes.Equal(got, full) {
				t.Fatalf("record line %q re-encodes as %q", line, got)
			}
		}
		if c, n, err := parseCaseBlock(line); err == nil {
			if got := appendCaseBlock(nil, c, n); !bytes.Equal(got, full) {
				t.Fatalf("case block %q re-encodes as %q", line, got)
			}
		}
		for _, kind := range []string{KindPackageEnd, KindExportEnd} {
			if tr, err := parseTrailer(line, kind); err == nil {
				if got := appendTrailer(nil, kind, tr); !bytes.Equal(got, full) {
					t.Fatalf("trailer %q re-encodes as %q", line, got)
				}
			}
		}
		if h, err := parseHeader(line); err == nil && (h.Kind == KindPackage || h.Kind == KindExport) {
			got, err := marshalHeader(h)
			if err != nil || !bytes.Equal(got, full) {
				t.Fatalf("header %q re-encodes as %q (%v)", line, got, err)
			}
		}
	})
}

// FuzzVerify is in disclosure/internal/verifyfuzz: a test binary that does
// not link SQLite, whose coverage instrumentation made it crawl here.

// A statement's text has one spelling: whatever ParseStatement accepts
// marshals back to the same bytes, and openStatement never panics on a
// hostile note.
func FuzzParseStatement(f *testing.F) {
	_, pkg, _ := loadVectors(f)
	ls := lines(pkg)
	tr, err := parseTrailer(bytes.TrimSuffix(ls[len(ls)-1], []byte("\n")), KindPackageEnd)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(tr.Statement))
	f.Add([]byte(tr.Statement[:strings.Index(tr.Statement, "\n\n")+1]))
	f.Add([]byte(StatementLine + "\norigin o\nsize 0\nroot " + strings.Repeat("0", 64) + "\nrecipient r\nselection " + strings.Repeat("0", 64) + "\ncounts 0 0 0 0\nblocks " + strings.Repeat("0", 64) + "\n"))
	k := newKeys(f, testOrigin, 3)
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, err := ParseStatement(b); err == nil {
			if got := st.Marshal(); !bytes.Equal(got, b) {
				t.Fatalf("ParseStatement(%q) re-marshals as %q", b, got)
			}
		}
		openStatement(b, []note.Verifier{k.discV}, testOrigin)
	})
}
