package disclosure

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/runseal/runseal/internal/benchjournal"
	"github.com/runseal/runseal/store"
)

// multiChunkPackage writes a genuine package of about 3.6 MB, several
// read-ahead chunks, from a synthetic journal (every 10th run unsealed).
func multiChunkPackage(t *testing.T) ([]byte, Options) {
	t.Helper()
	j, err := benchjournal.New(benchjournal.Spec{Origin: testOrigin, Runs: 160, RecordsPerRun: 20, PayloadBytes: 900, UnsealedEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeys(t, testOrigin, 11)
	cp, _ := j.Checkpoint(context.Background())
	var buf bytes.Buffer
	if _, err := WritePackage(context.Background(), j, &buf, Selection{Cases: []store.CaseID{j.Case}}, k.sign(t, cp), k.signing()); err != nil {
		t.Fatal(err)
	}
	if buf.Len() < 5*aheadChunkSize {
		t.Fatalf("package of %d bytes: fewer than 5 chunks", buf.Len())
	}
	return buf.Bytes(), k.options()
}

// The workers compute nearly every record's chain hash ahead of the
// verifier, across chunk boundaries, and the verdict is the same: only a
// record whose line spans two chunks, and the one after it, are left to
// the verifier. (Were the workers' results never used, verification would
// silently fall back to one core's speed.)
func TestVerify_WorkersChainAheadAcrossChunks(t *testing.T) {
	pkg, opts := multiChunkPackage(t)
	v, err := verify(context.Background(), bytes.NewReader(pkg), opts)
	if err != nil {
		t.Fatal(err)
	}
	mustSound(t, v.rep)
	chunks := uint64(len(pkg)/aheadChunkSize + 1)
	if n := v.rep.Counts.Records; v.chainedAhead+2*chunks < n {
		t.Fatalf("workers chained %d of %d records ahead; want all but at most %d", v.chainedAhead, n, 2*chunks)
	}
}

// A worker chains a record from the hash the line before it claims; the
// verifier takes that result only when the claim is the hash it recomputed
// itself. A record changed in place makes its own hash false; were the
// workers' results taken regardless, the next record's would re-join the
// claimed chain, the run's terminal hash would equal its seal, and the
// change would show as a record_hash finding alone. The seal finding must
// be there too, wherever the changed record lies against chunk
// boundaries: in the line spanning one, just before or after it, or in the
// middle of a chunk.
func TestVerify_ChangedRecordDoesNotRejoinClaimedChain(t *testing.T) {
	pkg, opts := multiChunkPackage(t)
	ls := lines(pkg)
	starts := make([]int, len(ls))
	off := 0
	for i, l := range ls {
		starts[i] = off
		off += len(l)
	}
	targets := map[int]bool{}
	for b := aheadChunkSize; b < len(pkg) && b <= 4*aheadChunkSize; b += aheadChunkSize {
		i := 0
		for i+1 < len(ls) && starts[i+1] <= b {
			i++
		}
		for _, d := range []int{-1, 0, 1, 2} {
			targets[i+d] = true
		}
		targets[i+40] = true
	}
	tried := 0
	for i := range targets {
		if i <= 0 || i >= len(ls) || !bytes.HasPrefix(ls[i], recordLinePrefix) {
			continue
		}
		// The run's block is the nearest run block line above.
		blk := i - 1
		for !isRunBlock(ls[blk], KindPackageRun) {
			blk--
		}
		var rb runBlock
		if err := parseRunBlock(bytes.TrimSuffix(ls[blk], []byte("\n")), KindPackageRun, true, &rb); err != nil {
			t.Fatal(err)
		}
		// Flip the case of a letter of the record's text: still a
		// canonical body, other bytes.
		p := bytes.Index(ls[i], []byte(`"text":"`))
		if p < 0 {
			continue // a conclusion: no text
		}
		p += len(`"text":"`) + 3
		for ls[i][p]|0x20 < 'a' || ls[i][p]|0x20 > 'z' {
			p++
		}
		mut := bytes.Clone(pkg)
		mut[starts[i]+p] ^= 0x20
		rep := verifyBytes(t, mut, opts)
		line := int64(i + 1)
		var hashAt, sealOf bool
		for _, f := range rep.Findings {
			hashAt = hashAt || f.Check == CheckRecordHash && f.Line == line
			sealOf = sealOf || f.Check == CheckSeal && f.Run == rb.Run.String()
		}
		where := fmt.Sprintf("line %d (bytes %d to %d, run %s, sealed %v)", line, starts[i], starts[i]+len(ls[i]), rb.Run, rb.Sealed)
		if rep.Verdict != NotSound || !hashAt {
			t.Fatalf("%s changed: %s; want a record_hash finding at its line", where, summary(rep))
		}
		if rb.Sealed && !sealOf {
			t.Fatalf("%s changed: no seal finding, the chain re-joined the claimed hashes: %s", where, summary(rep))
		}
		tried++
	}
	if tried < 8 {
		t.Fatalf("only %d records tried", tried)
	}
}

// OnRecord sees, in package order, the records one of whose top-level
// members RecordFilter accepts, and every record without a filter.
func TestVerify_RecordFilter(t *testing.T) {
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.A, w.B, w.C}})
	for _, c := range []struct {
		name   string
		filter func(k, v []byte) bool
		want   []string // kinds, in order
	}{
		{"none", nil, []string{"RunAdmitted", "Note", "EffectStarted", "Note", "RunConcluded", "RunAdmitted", "Note", "RunConcluded", "RunAdmitted", "Note", "RunConcluded"}},
		{"notes", func(k, v []byte) bool { return string(k) == "text" }, []string{"Note", "Note", "Note", "Note"}},
		{"a value", func(k, v []byte) bool { return string(v) == `"quarantined"` }, []string{"RunConcluded"}},
		{"nothing", func(k, v []byte) bool { return false }, nil},
	} {
		opts := w.k.options()
		var got []string
		opts.OnRecord = func(raw []byte) {
			b, err := store.DecodeBody(raw)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b.Kind)
		}
		opts.RecordFilter = c.filter
		mustSound(t, verifyBytes(t, pkg, opts))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: OnRecord saw %v, want %v", c.name, got, c.want)
		}
	}
}

// chainHasher is store.ChainHash on either side of the size where it stops
// copying records into its buffer, whatever the order of the sizes.
func TestChainHasherIsChainHash(t *testing.T) {
	var c chainHasher
	prev := store.Digest{1, 2, 3}
	for _, n := range []int{0, 1, 1100, chainCopyMax, chainCopyMax + 1, 3 * chainCopyMax, 5, chainCopyMax - 1, 1100} {
		raw := bytes.Repeat([]byte{byte(n)}, n)
		if got, want := c.sum(prev, raw), store.ChainHash(prev, raw); got != want {
			t.Fatalf("%d bytes: %s, store.ChainHash %s", n, got, want)
		}
		prev = c.sum(prev, raw)
	}
}
