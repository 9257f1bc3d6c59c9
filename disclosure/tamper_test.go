package disclosure

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/runseal/runseal/store"
)

// A genuine package must verify; any single change to it must not, and with
// the right verdict. NotSound is "tampered or inconsistent"; Unverifiable is
// reserved for a cut file and for changes that make the file a different
// kind or version, or a signature an unknown key's (which the auditor
// cannot tell from a note made for other keys).

// regions finds, in a package, the byte ranges where a change may turn the
// verdict Unverifiable instead of NotSound.
type regions struct {
	either [][2]int // a change here may give either verdict
	cut    int      // a change at or after this offset cuts the file (its last newline)
}

func tamperRegions(t testing.TB, pkg []byte) regions {
	t.Helper()
	hdrEnd := bytes.IndexByte(pkg, '\n')
	hdr := pkg[:hdrEnd]
	trailerStart := bytes.LastIndexByte(pkg[:len(pkg)-1], '\n') + 1
	var r regions
	// A signature line's key name and the base64 characters that carry its
	// key ID (4 bytes: 6 characters, the 6th shared): changed, the
	// signature is an unknown key's. In the header's note and in the
	// trailer's statement alike.
	sig := regexp.MustCompile(`\\n\x{2014} ([^ ]+ [A-Za-z0-9+/]{6})`)
	for _, c := range []struct {
		re   *regexp.Regexp
		in   []byte
		base int
	}{
		{regexp.MustCompile(`"kind":"(runseal\.disclosure)"`), hdr, 0},
		{regexp.MustCompile(`"version":(1)`), hdr, 0},
		{sig, hdr, 0},
		{sig, pkg[trailerStart:], trailerStart},
	} {
		ms := c.re.FindAllSubmatchIndex(c.in, -1)
		if len(ms) == 0 {
			t.Fatalf("no match for %s", c.re)
		}
		for _, m := range ms {
			r.either = append(r.either, [2]int{c.base + m[2], c.base + m[3]})
		}
	}
	r.cut = len(pkg) - 1
	return r
}

func (r regions) want(i int) (Verdict, bool) {
	if i >= r.cut {
		return Unverifiable, false
	}
	for _, e := range r.either {
		if i >= e[0] && i < e[1] {
			return "", true
		}
	}
	return NotSound, false
}

func checkTampered(t *testing.T, pkg []byte, opts Options, what string, want Verdict, either bool) {
	t.Helper()
	rep, err := Verify(context.Background(), bytes.NewReader(pkg), opts)
	if err != nil {
		t.Fatalf("%s: Verify: %v", what, err)
	}
	switch {
	case rep.Verdict == Sound:
		t.Fatalf("%s: a tampered package verified", what)
	case either:
	case rep.Verdict != want:
		t.Fatalf("%s: verdict %s, want %s: %s", what, rep.Verdict, want, summary(rep))
	}
}

// byteChanges are applied at every offset: all eight single-bit flips, and
// replacement by bytes that matter to the framing.
var byteChanges = []func(byte) byte{
	func(b byte) byte { return b ^ 0x01 }, func(b byte) byte { return b ^ 0x02 },
	func(b byte) byte { return b ^ 0x04 }, func(b byte) byte { return b ^ 0x08 },
	func(b byte) byte { return b ^ 0x10 }, func(b byte) byte { return b ^ 0x20 },
	func(b byte) byte { return b ^ 0x40 }, func(b byte) byte { return b ^ 0x80 },
	func(byte) byte { return '\n' }, func(byte) byte { return '"' }, func(byte) byte { return '0' },
	func(byte) byte { return ' ' }, func(byte) byte { return '}' },
}

func smallPackages(t *testing.T) (*world, map[string][]byte) {
	w := newWorld(t)
	return w, map[string][]byte{
		"runs, unsealed and a case": w.pkg(t, Selection{Runs: []store.RunID{w.C, w.A}, Cases: []store.CaseID{w.X}}),
		"by case":                   w.pkg(t, Selection{Cases: []store.CaseID{w.X}}),
	}
}

func TestTamperEveryByte(t *testing.T) {
	w, pkgs := smallPackages(t)
	opts := w.k.options()
	stride := 1
	if raceEnabled || testing.Short() {
		stride = 7 // every offset class is still hit across the changes
	}
	for name, pkg := range pkgs {
		t.Run(name, func(t *testing.T) {
			mustSound(t, verifyBytes(t, pkg, opts))
			reg := tamperRegions(t, pkg)
			mut := make([]byte, len(pkg))
			n := 0
			for i := range pkg {
				for ci, change := range byteChanges {
					if (i*len(byteChanges)+ci)%stride != 0 {
						continue
					}
					b := change(pkg[i])
					if b == pkg[i] {
						continue
					}
					copy(mut, pkg)
					mut[i] = b
					want, either := reg.want(i)
					checkTampered(t, mut, opts, fmt.Sprintf("byte %d %q -> %q", i, pkg[i], b), want, either)
					n++
				}
			}
			t.Logf("%d single-byte changes of a %d-byte package, none verified", n, len(pkg))
		})
	}
}

func TestTamperLines(t *testing.T) {
	w, pkgs := smallPackages(t)
	opts := w.k.options()
	for name, pkg := range pkgs {
		t.Run(name, func(t *testing.T) {
			ls := lines(pkg)
			last := len(ls) - 1
			for i := range ls {
				// Delete line i: dropping the trailer cuts the file.
				del := join(append(append([][]byte{}, ls[:i]...), ls[i+1:]...))
				want := NotSound
				if i == last {
					want = Unverifiable
				}
				checkTampered(t, del, opts, fmt.Sprintf("delete line %d", i+1), want, false)
				// Duplicate line i in place.
				dup := join(append(append(append([][]byte{}, ls[:i+1]...), ls[i]), ls[i+1:]...))
				checkTampered(t, dup, opts, fmt.Sprintf("duplicate line %d", i+1), NotSound, false)
				// Move line i to the end, and to the start.
				moved := append(append(append([][]byte{}, ls[:i]...), ls[i+1:]...), ls[i])
				if i != last {
					checkTampered(t, join(moved), opts, fmt.Sprintf("move line %d to the end", i+1), NotSound, false)
				}
				if i != 0 {
					moved = append([][]byte{ls[i]}, append(append([][]byte{}, ls[:i]...), ls[i+1:]...)...)
					checkTampered(t, join(moved), opts, fmt.Sprintf("move line %d to the start", i+1), NotSound, false)
				}
				// Swap it with every later line.
				for j := i + 1; j < len(ls); j++ {
					sw := append([][]byte{}, ls...)
					sw[i], sw[j] = sw[j], sw[i]
					checkTampered(t, join(sw), opts, fmt.Sprintf("swap lines %d and %d", i+1, j+1), NotSound, false)
				}
			}
			// Cut at every length: never sound, always "cut", never "tampered".
			for n := 0; n < len(pkg); n++ {
				checkTampered(t, pkg[:n], opts, fmt.Sprintf("cut to %d bytes", n), Unverifiable, false)
			}
			// Anything after the trailer.
			checkTampered(t, append(bytes.Clone(pkg), '\n'), opts, "an empty line after the trailer", NotSound, false)
			checkTampered(t, append(bytes.Clone(pkg), 'x'), opts, "a byte after the trailer", NotSound, false)
			checkTampered(t, append(bytes.Clone(pkg), ls[last]...), opts, "a second trailer", NotSound, false)
		})
	}
}

// Parts of another genuine package (the same journal and keys, another
// checkpoint) swapped into this one: a proof, a cosignature, a signature,
// a whole run.
func TestTamperSwapFromAnotherPackage(t *testing.T) {
	w := newWorld(t)
	sel := Selection{Runs: []store.RunID{w.A, w.B, w.C}}
	p1 := w.pkg(t, sel)
	// Grow the log, then write the same selection against the new checkpoint.
	appendAll(t, w.j, 1, noteRec(runID(0x42), store.CaseID{}, "x"), conclude(runID(0x42), "succeeded"))
	seal(t, w.j, runID(0x42), 1, "succeeded")
	w.k.at = w.k.at.Add(3600e9)
	p2 := w.pkg(t, sel)
	opts := w.k.options()
	mustSound(t, verifyBytes(t, p1, opts))
	mustSound(t, verifyBytes(t, p2, opts))
	l1, l2 := lines(p1), lines(p2)
	if len(l1) != len(l2) {
		t.Fatal("packages of one selection differ in length")
	}
	proofRE := regexp.MustCompile(`"proof":\[[^\]]*\]`)
	swaps := 0
	for i := range l1 {
		if bytes.Equal(l1[i], l2[i]) {
			continue
		}
		// Whole line from the other package.
		mixed := append([][]byte{}, l1...)
		mixed[i] = l2[i]
		checkTampered(t, join(mixed), opts, fmt.Sprintf("line %d from another package", i+1), NotSound, false)
		swaps++
		// Just the proof.
		if p := proofRE.Find(l2[i]); p != nil && i > 0 {
			mixed[i] = proofRE.ReplaceAll(l1[i], p)
			if !bytes.Equal(mixed[i], l1[i]) {
				checkTampered(t, join(mixed), opts, fmt.Sprintf("proof of line %d from another package", i+1), NotSound, false)
				swaps++
			}
		}
	}
	// One cosignature, one log signature, from the other package's note.
	sigRE := regexp.MustCompile(`\\n\x{2014} [^ ]+ [A-Za-z0-9+/=]+`)
	s1, s2 := sigRE.FindAll(l1[0], -1), sigRE.FindAll(l2[0], -1)
	if len(s1) != 3 || len(s2) != 3 {
		t.Fatalf("signature lines %d and %d", len(s1), len(s2))
	}
	for k := range s1 {
		h := bytes.Replace(l1[0], s1[k], s2[k], 1)
		mixed := append([][]byte{h}, l1[1:]...)
		checkTampered(t, join(mixed), opts, fmt.Sprintf("signature %d from another package", k+1), NotSound, false)
		swaps++
	}
	if swaps < 5 {
		t.Fatalf("only %d swaps tried", swaps)
	}
}

// A larger package, tampered at random offsets and lines.
func TestTamperSampledLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large package")
	}
	ctx := context.Background()
	j := openJournal(t, testOrigin)
	k := newKeys(t, testOrigin, 4)
	c := caseID(9)
	var sel Selection
	for i := range 60 {
		run := runID(byte(i + 1))
		var batch []store.Append
		for n := range 15 {
			cs := store.CaseID{}
			if n == 3 && i%4 == 0 {
				cs = c
			}
			batch = append(batch, noteRec(run, cs, fmt.Sprintf("run %d record %d %s", i, n, bytes.Repeat([]byte{'x'}, n*20))))
		}
		outcome := []string{"succeeded", "failed", "quarantined"}[i%3]
		batch = append(batch, conclude(run, outcome))
		appendAll(t, j, store.Epoch(i%3+1), batch...)
		if outcome != "failed" {
			seal(t, j, run, store.Epoch(i%3+1), outcome)
		}
		if i%2 == 0 {
			sel.Runs = append(sel.Runs, run)
		}
	}
	sel.Cases = []store.CaseID{c}
	cp, _ := j.Checkpoint(ctx)
	var buf bytes.Buffer
	if _, err := WritePackage(ctx, j, &buf, sel, k.sign(t, cp), k.signing()); err != nil {
		t.Fatal(err)
	}
	pkg := buf.Bytes()
	opts := k.options()
	mustSound(t, verifyBytes(t, pkg, opts))
	reg := tamperRegions(t, pkg)
	rng := rand.New(rand.NewPCG(1, 2))
	samples := 3000
	if raceEnabled {
		samples = 300
	}
	mut := make([]byte, len(pkg))
	for range samples {
		i := rng.IntN(len(pkg))
		b := byteChanges[rng.IntN(len(byteChanges))](pkg[i])
		if b == pkg[i] {
			continue
		}
		copy(mut, pkg)
		mut[i] = b
		want, either := reg.want(i)
		checkTampered(t, mut, opts, fmt.Sprintf("byte %d %q -> %q", i, pkg[i], b), want, either)
	}
	ls := lines(pkg)
	for range samples / 10 {
		i, j := rng.IntN(len(ls)), rng.IntN(len(ls))
		if i == j {
			continue
		}
		sw := append([][]byte{}, ls...)
		sw[i], sw[j] = sw[j], sw[i]
		checkTampered(t, join(sw), opts, fmt.Sprintf("swap lines %d and %d", i+1, j+1), NotSound, false)
		del := join(append(append([][]byte{}, ls[:i]...), ls[i+1:]...))
		want := NotSound
		if i == len(ls)-1 {
			want = Unverifiable
		}
		checkTampered(t, del, opts, fmt.Sprintf("delete line %d", i+1), want, false)
		dup := join(append(append(append([][]byte{}, ls[:i+1]...), ls[i]), ls[i+1:]...))
		checkTampered(t, dup, opts, fmt.Sprintf("duplicate line %d", i+1), NotSound, false)
	}
	t.Logf("%d-byte package, %d lines: sampled changes all refused", len(pkg), len(ls))
}

// Issue 29 item 4: spec/disclosure.md 4.2 item 1 makes a non-integer
// version header and any integer version other than 1 unverifiable; -1
// and 2^64 are integers (the canonical number of records.md section 3 is
// an integer literal), so they are versions this build does not read, not
// damaged headers.
func TestVerify_NegativeVersionIsUnverifiable(t *testing.T) {
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.A}})
	for _, c := range []struct {
		version string
		verdict Verdict
	}{
		{`-1`, Unverifiable},
		{`-0`, Unverifiable},
		{`18446744073709551616`, Unverifiable},
		{`2`, Unverifiable},
		{`1.5`, NotSound},
		{`"1"`, NotSound},
		{`null`, NotSound},
	} {
		rep := verifyBytes(t, bytes.Replace(pkg, []byte(`"version":1}`), []byte(`"version":`+c.version+`}`), 1), w.k.options())
		if rep.Verdict != c.verdict || (c.verdict == NotSound && rep.Findings[0].Check != CheckHeader) {
			t.Errorf("version %s: %s, want %s", c.version, summary(rep), c.verdict)
		}
	}
}

// Issue 29 item 5: after the trailer, any byte is after_trailer, a line
// over 8 MiB that the file ends inside too: the reader decides a line is
// over 8 MiB once it has read 8,388,609 bytes of it and reads no further
// (spec/disclosure.md 4.2 item 2), so before the trailer such a line is
// framing, not cut.
func TestVerify_LongCutLineAfterTrailerIsAfterTrailer(t *testing.T) {
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.A}})
	long := bytes.Repeat([]byte("x"), MaxLine+1)
	ls := lines(pkg)
	for _, c := range []struct {
		name  string
		file  []byte
		check string
	}{
		{"after the trailer, cut", append(bytes.Clone(pkg), long...), CheckAfterTrailer},
		{"after the trailer, ended", append(append(bytes.Clone(pkg), long...), '\n'), CheckAfterTrailer},
		{"before the trailer, cut", append(join(ls[:len(ls)-1]), long...), CheckFraming},
	} {
		rep := verifyBytes(t, c.file, w.k.options())
		if rep.Verdict != NotSound || rep.Findings[0].Check != c.check {
			t.Errorf("%s: %s, want the first finding %s", c.name, summary(rep), c.check)
		}
	}
}
