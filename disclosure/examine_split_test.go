package disclosure

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/runseal/runseal/store"
)

// The workers find a chunk's record lines first and check their bodies
// after, while the digest goroutine chains them: the verifier must wait
// for the checks, not only for the digest. A record whose body alone is
// wrong (not canonical: a space after a colon) but whose hash and every
// hash after it in its run were recomputed over the changed bytes is
// caught by the body check and nothing else; were a chunk handed over
// before its bodies were checked, or a chunk's lines chained but never
// checked, it would pass. Records in unsealed runs (no seal or inclusion
// proof to trip), at every place in their chunks.
func TestVerify_BodyOnlyChangeCaughtInEveryChunk(t *testing.T) {
	pkg, opts := multiChunkPackage(t)
	ls := lines(pkg)
	starts := make([]int, len(ls)+1)
	for i, l := range ls {
		starts[i+1] = starts[i] + len(l)
	}
	tried, chunks := 0, map[int]bool{}
	var rb runBlock
	for i := 1; i < len(ls); i++ {
		if isRunBlock(ls[i], KindPackageRun) {
			if err := parseRunBlock(bytes.TrimSuffix(ls[i], []byte("\n")), KindPackageRun, true, &rb); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if rb.Sealed || !bytes.HasPrefix(ls[i], recordLinePrefix) || i%3 != 0 {
			continue
		}
		mut := rehashFrom(t, pkg, ls, starts, i, func(raw []byte) []byte {
			c := bytes.IndexByte(raw, ':')
			return append(append(bytes.Clone(raw[:c+1]), ' '), raw[c+1:]...)
		})
		rep := verifyBytes(t, mut, opts)
		line := int64(i + 1)
		var body, hash bool
		for _, f := range rep.Findings {
			body = body || f.Check == CheckRecordBody && f.Line == line
			hash = hash || f.Check == CheckRecordHash
		}
		if rep.Verdict != NotSound || !body || hash {
			t.Fatalf("line %d (bytes %d to %d) given a non-canonical body with its run's hashes recomputed: %s; want a record_body finding at the line and no record_hash finding",
				line, starts[i], starts[i+1], summary(rep))
		}
		chunks[starts[i]/aheadChunkSize] = true
		tried++
	}
	if tried < 20 || len(chunks) < 5 {
		t.Fatalf("%d records tried in %d chunks", tried, len(chunks))
	}
}

// rehashFrom returns pkg with the raw bytes of record line i changed by f,
// and the claimed hashes of that record and of the records after it in
// its run recomputed over the bytes as they now are.
func rehashFrom(t *testing.T, pkg []byte, ls [][]byte, starts []int, i int, f func(raw []byte) []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	out.Write(pkg[:starts[i]])
	var prev store.Digest
	if j := i - 1; bytes.HasPrefix(ls[j], recordLinePrefix) {
		claimed, _, err := parseRecordLine(bytes.TrimSuffix(ls[j], []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		prev = claimed
	}
	j := i
	for ; j < len(ls) && bytes.HasPrefix(ls[j], recordLinePrefix); j++ {
		_, raw, err := parseRecordLine(bytes.TrimSuffix(ls[j], []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if j == i {
			raw = f(raw)
		}
		prev = store.ChainHash(prev, raw)
		fmt.Fprintf(&out, `{"hash":"%s","raw":%s}`+"\n", prev, raw)
	}
	out.Write(pkg[starts[j]:])
	return out.Bytes()
}

// minRecordLine bounds how many record lines one chunk holds
// (aheadChunkSize/minRecordLine+1, the most a chunk's table grows to): it
// must be the length of the shortest line parseRecordLine accepts, with
// its newline, or the bound the reader's comments state would be wrong.
func TestMinRecordLine_ShortestAcceptedLine(t *testing.T) {
	h := store.ZeroDigest.String()
	shortest := []byte(`{"hash":"` + h + `","raw":x}`)
	if _, _, err := parseRecordLine(shortest); err != nil || len(shortest)+1 != minRecordLine {
		t.Fatalf("the %d-byte line %q: %v; minRecordLine is %d", len(shortest), shortest, err, minRecordLine)
	}
	if _, _, err := parseRecordLine([]byte(`{"hash":"` + h + `","raw":}`)); err == nil {
		t.Fatal("a line one byte shorter was accepted")
	}
}
