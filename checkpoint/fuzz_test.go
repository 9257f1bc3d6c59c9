package checkpoint

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

func FuzzParse(f *testing.F) {
	for _, v := range loadVectors(f).Bodies {
		if v.TextB64 == "" {
			f.Add([]byte(v.Text))
		}
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		cp, err := Parse(text)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrMalformedCheckpoint) {
				t.Fatalf("Parse error %v is not a checkpoint *SyntaxError", err)
			}
			return
		}
		// One spelling: the text is what Marshal produces.
		if got := cp.Marshal(); !bytes.Equal(got, text) {
			t.Fatalf("Marshal(Parse(%q)) = %q", text, got)
		}
		cp2, err := Parse(cp.Marshal())
		if err != nil || !reflect.DeepEqual(cp, cp2) {
			t.Fatalf("Parse(Marshal(cp)) = %+v, %v; want %+v", cp2, err, cp)
		}
		if err := cp.Validate(); err != nil {
			t.Fatalf("Validate of a parsed checkpoint: %v", err)
		}
		if (cp.Coherent() == nil) != (cp.Size != 0 || cp.Root == EmptyRoot()) {
			t.Fatalf("Coherent wrong for %+v", cp)
		}
	})
}

// fuzzKeys are fixed keys for the note fuzzers: the vectors' log-acme and
// witness keys, so the seed corpus verifies.
type fuzzKeys struct {
	vf     *vectorFile
	logV   note.Verifier
	known  []note.Verifier
	policy *Policy
}

func newFuzzKeys(f *testing.F) *fuzzKeys {
	vf := loadVectors(f)
	i := slices.IndexFunc(vf.Keys, func(k vecKey) bool { return k.ID == "log-acme" })
	logV, err := NewVerifier(vf.Keys[i].VKey)
	if err != nil {
		f.Fatal(err)
	}
	fk := &fuzzKeys{vf: vf, logV: logV, known: []note.Verifier{logV}}
	var ws []*CosignatureVerifier
	for _, id := range []string{"witness1", "witness2", "witness3"} {
		i := slices.IndexFunc(vf.Keys, func(k vecKey) bool { return k.ID == id })
		v, err := NewCosignatureVerifier(vf.Keys[i].VKey)
		if err != nil {
			f.Fatal(err)
		}
		ws = append(ws, v)
		fk.known = append(fk.known, v)
	}
	if fk.policy, err = NewThresholdPolicy(2, ws...); err != nil {
		f.Fatal(err)
	}
	return fk
}

func FuzzOpen(f *testing.F) {
	fk := newFuzzKeys(f)
	for _, v := range fk.vf.Open {
		if v.NoteB64 == "" {
			f.Add([]byte(v.Note))
		}
	}
	for _, v := range fk.vf.PolicyChecks {
		f.Add([]byte(v.Note))
	}
	known := note.VerifierList(fk.known...)
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, err := Open(msg, known)
		// OpenNote is Open without the body: what Open accepts, it accepts
		// with the same text and signatures.
		if text, sigs, nerr := OpenNote(msg, known); err == nil && (nerr != nil || !bytes.Equal(text, s.Text()) || !slices.Equal(sigs, s.Signatures())) {
			t.Fatalf("Open accepted, OpenNote = %v (%d signatures)", nerr, len(sigs))
		}
		ev, everr := fk.policy.Evaluate(msg)
		vs, verr := fk.policy.Verify(msg, fk.logV)
		if verr == nil {
			// The auditor's yes implies every weaker check says yes.
			if err != nil || everr != nil || !ev.Met || !s.SignedBy(fk.logV) {
				t.Fatalf("Verify accepted but Open = %v, Evaluate = %+v, %v", err, ev, everr)
			}
			if !bytes.Equal(vs.Note(), s.Note()) {
				t.Fatalf("Verify and Open disagree on the verified note")
			}
		}
		if everr == nil && ev.Met {
			n := 0
			for _, w := range ev.Witnesses {
				if w.Cosigned {
					n++
				}
			}
			if n < 2 {
				t.Fatalf("Evaluate met with %d witnesses", n)
			}
		}
		if err != nil {
			if s != nil {
				t.Fatal("Open returned a Signed with an error")
			}
			return
		}
		// We are at least as strict as x/mod: what we accept, it accepts,
		// with the same verified signatures.
		n, xerr := note.Open(msg, known)
		if xerr != nil {
			t.Fatalf("Open accepted a note x/mod rejects (%v)", xerr)
		}
		if !slices.Equal(n.Sigs, s.Signatures()) {
			t.Fatalf("verified signatures differ: x/mod %v, ours %v", n.Sigs, s.Signatures())
		}
		// The rebuilt note is a fixed point and carries only verified lines.
		rebuilt := s.Note()
		s2, err := Open(rebuilt, known)
		if err != nil {
			t.Fatalf("Open(Note()) = %v", err)
		}
		if !bytes.Equal(s2.Note(), rebuilt) || !reflect.DeepEqual(s2.Checkpoint(), s.Checkpoint()) {
			t.Fatalf("Open(Note()) is not a fixed point")
		}
		if n2, err := note.Open(rebuilt, known); err != nil || len(n2.UnverifiedSigs) != 0 {
			t.Fatalf("rebuilt note: %v, unverified %v", err, n2.UnverifiedSigs)
		}
		if !bytes.Equal(s.Checkpoint().Marshal(), s.Text()) {
			t.Fatalf("body is not canonical")
		}
	})
}

func FuzzCosignatureVerify(f *testing.F) {
	fk := newFuzzKeys(f)
	i := slices.IndexFunc(fk.vf.Keys, func(k vecKey) bool { return k.ID == "witness1" })
	c, err := NewCosigner(fk.vf.Keys[i].SKey)
	if err != nil {
		f.Fatal(err)
	}
	v := c.Verifier()
	theirs, err := fnote.NewVerifierForCosignatureV1(fk.vf.Keys[i].VKey)
	if err != nil {
		f.Fatal(err)
	}
	for _, cv := range fk.vf.Cosignatures {
		sig, _ := c.At(time.Unix(int64(cv.Time), 0)).Sign([]byte(cv.Body))
		f.Add([]byte(cv.Body), sig, int64(cv.Time))
	}
	f.Add([]byte("o\n0\n"+emptyB64+"\n"), make([]byte, 72), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, body, sig []byte, ts int64) {
		ok := v.Verify(body, sig)
		if ok && !theirs.Verify(body, sig) {
			t.Fatalf("we accept a cosignature formats rejects")
		}
		if ok {
			if _, err := Parse(body); err != nil {
				t.Fatalf("accepted a cosignature over a malformed body: %v", err)
			}
		}
		// Sign at the fuzzed time and check both verifiers accept, and a
		// flipped bit is refused.
		good, err := c.At(time.Unix(ts, 0)).Sign(body)
		if err != nil {
			return
		}
		if !v.Verify(body, good) || !theirs.Verify(body, good) {
			t.Fatalf("own cosignature refused at time %d", ts)
		}
		bad := bytes.Clone(good)
		bad[int(uint64(ts)%uint64(len(bad)))] ^= 1
		if v.Verify(body, bad) {
			t.Fatalf("corrupted cosignature accepted")
		}
	})
}

func FuzzParsePolicy(f *testing.F) {
	vf := loadVectors(f)
	for _, v := range vf.Policies {
		f.Add([]byte(v.Policy))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			if !errors.Is(err, ErrMalformedPolicy) {
				t.Fatalf("ParsePolicy error %v does not wrap ErrMalformedPolicy", err)
			}
			return
		}
		text, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		p2, err := ParsePolicy(text)
		if err != nil {
			t.Fatalf("ParsePolicy(MarshalText()) = %v\n%s", err, text)
		}
		text2, _ := p2.MarshalText()
		if !bytes.Equal(text, text2) {
			t.Fatalf("MarshalText not stable:\n%s\n%s", text, text2)
		}
		if p.RequiresWitnesses() != p2.RequiresWitnesses() || len(p.Witnesses()) != len(p2.Witnesses()) || len(p.Logs()) != len(p2.Logs()) {
			t.Fatalf("round trip changed the policy")
		}
		// The quorum function is the same on every subset of (up to 8) witnesses.
		n := min(len(p.witnesses), 8)
		for mask := range 1 << n {
			cs := make([]bool, len(p.witnesses))
			for i := range n {
				cs[i] = mask&(1<<i) != 0
			}
			if p.met(cs) != p2.met(cs) {
				t.Fatalf("round trip changed the quorum for %b", mask)
			}
		}
	})
}

// FuzzSignOpen signs fuzzed bodies with real keys and appends fuzzed lines,
// so the accept path of Open, Evaluate and Verify sees valid signatures.
func FuzzSignOpen(f *testing.F) {
	fk := newFuzzKeys(f)
	var signers []note.Signer
	for _, id := range []string{"log-acme", "witness1", "witness2"} {
		i := slices.IndexFunc(fk.vf.Keys, func(k vecKey) bool { return k.ID == id })
		s, err := NewSigner(fk.vf.Keys[i].SKey)
		if err != nil {
			f.Fatal(err)
		}
		if c, ok := s.(*Cosigner); ok {
			s = c.At(time.Unix(1700000000, 0))
		}
		signers = append(signers, s)
	}
	for _, v := range fk.vf.Bodies {
		f.Add([]byte(v.Text), []byte(""), uint8(7))
	}
	f.Add([]byte(fk.vf.Signed[0].Body), []byte("\u2014 witness.example/w1 AAAAAAA=\n"), uint8(1))
	known := note.VerifierList(fk.known...)
	f.Fuzz(func(t *testing.T, body, extra []byte, which uint8) {
		var ss []note.Signer
		for i, s := range signers {
			if which&(1<<i) != 0 {
				ss = append(ss, s)
			}
		}
		msg, err := Sign(Checkpoint{}, ss...) // never valid: exercises refusal
		if err == nil {
			t.Fatal("signed the zero checkpoint")
		}
		cp, err := Parse(body)
		if err != nil || len(ss) == 0 {
			return
		}
		msg, err = Sign(cp, ss...)
		if err != nil {
			if cp.Coherent() == nil {
				t.Fatalf("Sign(%q): %v", body, err)
			}
			return
		}
		msg = append(msg, extra...)
		s, err := Open(msg, known)
		n, xerr := note.Open(msg, known)
		if err == nil {
			if xerr != nil || !slices.Equal(n.Sigs, s.Signatures()) {
				t.Fatalf("x/mod disagrees: %v, %v vs %v", xerr, n, s.Signatures())
			}
			if !bytes.Equal(s.Text(), body) {
				t.Fatalf("text changed")
			}
		}
		if len(extra) == 0 && err != nil {
			t.Fatalf("Open of a freshly signed note: %v", err)
		}
		if vs, err := fk.policy.Verify(msg, fk.logV); err == nil {
			if which&7 != 7 {
				t.Fatalf("Verify accepted without the log and two witnesses (signers %03b)", which&7)
			}
			if len(vs.Cosignatures()) != 2 {
				t.Fatalf("Verify: %d cosignatures", len(vs.Cosignatures()))
			}
		}
	})
}
