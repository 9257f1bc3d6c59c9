package checkpoint

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

func TestParseLimits(t *testing.T) {
	cp := testCheckpoint("o", 1)
	cp.Extensions = []string{strings.Repeat("x", MaxCheckpointLen)}
	if err := cp.Validate(); !errors.Is(err, ErrMalformedCheckpoint) {
		t.Errorf("Validate of an oversized checkpoint = %v", err)
	}
	if _, err := Parse(cp.Marshal()); !errors.Is(err, ErrMalformedCheckpoint) {
		t.Errorf("Parse of an oversized checkpoint = %v", err)
	}
	if _, err := Sign(cp, newTestKeys(t, "o", 0).logS); !errors.Is(err, ErrMalformedCheckpoint) {
		t.Errorf("Sign of an oversized checkpoint = %v", err)
	}
	// Just under the limit is fine.
	cp.Extensions = []string{strings.Repeat("x", MaxCheckpointLen-len(testCheckpoint("o", 1).Marshal())-1)}
	if _, err := Parse(cp.Marshal()); err != nil {
		t.Errorf("Parse of a maximal checkpoint: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, cp := range []Checkpoint{
		{Origin: ""},
		{Origin: strings.Repeat("a", 256)},
		{Origin: "a\nb"},
		{Origin: "a\x00"},
		{Origin: "\xff"},
		{Origin: "o", Extensions: []string{""}},
		{Origin: "o", Extensions: []string{"a\nb"}},
	} {
		if err := cp.Validate(); !errors.Is(err, ErrMalformedCheckpoint) {
			t.Errorf("Validate(%q) = %v", cp.Origin, err)
		}
		if _, err := Sign(cp, newTestKeys(t, "o", 0).logS); err == nil {
			t.Errorf("Sign(%q) succeeded", cp.Origin)
		}
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := Parse([]byte("o\n01\n" + emptyB64 + "\n"))
	if got, want := err.Error(), "malformed checkpoint: line 2 (size): leading zero"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

func TestSignRefuses(t *testing.T) {
	k := newTestKeys(t, "log.example", 1)
	incoherent := Checkpoint{Origin: "log.example", Size: 0}
	if _, err := Sign(incoherent, k.logS); !errors.Is(err, ErrIncoherent) {
		t.Errorf("Sign(incoherent) = %v", err)
	}
	if _, err := Sign(testCheckpoint("log.example", 1)); err == nil {
		t.Error("Sign without signers succeeded")
	}
	if _, err := Sign(testCheckpoint("log.example", 1), k.logS, k.logS); err == nil {
		t.Error("Sign with a signer twice succeeded")
	}
	// A cosigner refuses directly, even through x/mod's note.Sign.
	if _, err := note.Sign(&note.Note{Text: "not a checkpoint\n"}, k.ws[0]); !errors.Is(err, ErrMalformedCheckpoint) {
		t.Errorf("cosigning a non-checkpoint = %v", err)
	}
	if _, err := note.Sign(&note.Note{Text: string(incoherent.Marshal())}, k.ws[0]); !errors.Is(err, ErrIncoherent) {
		t.Errorf("cosigning an incoherent checkpoint = %v", err)
	}
	if _, err := k.ws[0].At(time.Unix(-1, 0)).Sign(testCheckpoint("log.example", 1).Marshal()); err == nil {
		t.Error("cosigning before 1970 succeeded")
	}
}

func TestCosignatureVerifierRefuses(t *testing.T) {
	k := newTestKeys(t, "log.example", 1)
	body := testCheckpoint("log.example", 3).Marshal()
	sig, err := k.ws[0].At(time.Unix(1e9, 0)).Sign(body)
	if err != nil {
		t.Fatal(err)
	}
	v := k.ws[0].Verifier()
	if !v.Verify(body, sig) {
		t.Fatal("valid cosignature refused")
	}
	if v.Verify(body, sig[:71]) || v.Verify(body, append(bytes.Clone(sig), 0)) {
		t.Error("wrong-length cosignature accepted")
	}
	for i := range sig {
		bad := bytes.Clone(sig)
		bad[i] ^= 0x80
		if v.Verify(body, bad) {
			t.Fatalf("cosignature with byte %d flipped accepted", i)
		}
	}
	if v.Verify(append(bytes.Clone(body), "\n"...), sig) {
		t.Error("cosignature accepted over a different body")
	}
	// A correctly signed message over something that is not a checkpoint.
	msg := []byte("not\na\ncheckpoint\n")
	raw := append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, ed25519.Sign(k.ws[0].key, appendCosignedMessage(nil, 1, msg))...)
	if v.Verify(msg, raw) {
		t.Error("cosignature over a non-checkpoint accepted")
	}
	if got := v.String(); got != k.wvk[0] {
		t.Errorf("String() = %s, want %s", got, k.wvk[0])
	}
	if !bytes.Equal(v.PublicKey(), k.ws[0].key.Public().(ed25519.PublicKey)) {
		t.Error("PublicKey mismatch")
	}
}

func TestCosignatureTimeChecksKeyID(t *testing.T) {
	k := newTestKeys(t, "log.example", 1)
	msg, err := Sign(testCheckpoint("log.example", 3), k.ws[0].At(time.Unix(5, 0)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(msg, note.VerifierList(k.ws[0].Verifier()))
	if err != nil {
		t.Fatal(err)
	}
	sig := s.Signatures()[0]
	if ts, err := CosignatureTime(sig); err != nil || ts.Unix() != 5 {
		t.Errorf("CosignatureTime = %v, %v", ts, err)
	}
	sig.Hash++
	if _, err := CosignatureTime(sig); err == nil {
		t.Error("CosignatureTime accepted a key ID mismatch")
	}
}

func TestOpenNilVerifiers(t *testing.T) {
	k := newTestKeys(t, "log.example", 0)
	msg, _ := Sign(testCheckpoint("log.example", 1), k.logS)
	if _, err := Open(msg, nil); !errors.Is(err, ErrUnverified) {
		t.Errorf("Open(msg, nil) = %v", err)
	}
}

func TestSignatureErrorAs(t *testing.T) {
	k := newTestKeys(t, "log.example", 0)
	msg, _ := Sign(testCheckpoint("log.example", 1), k.logS)
	msg = corruptLine(t, msg)
	_, err := Open(msg, note.VerifierList(k.logV))
	var se *SignatureError
	if !errors.As(err, &se) || se.Name != "log.example" || se.KeyHash != k.logV.KeyHash() {
		t.Fatalf("Open of a corrupted note = %v", err)
	}
}

// ambiguousVerifiers returns an error other than UnknownVerifierError.
type ambiguousVerifiers struct{}

func (ambiguousVerifiers) Verifier(name string, hash uint32) (note.Verifier, error) {
	return nil, errors.New("ambiguous")
}

// lyingVerifiers returns a verifier for another key.
type lyingVerifiers struct{ v note.Verifier }

func (l lyingVerifiers) Verifier(name string, hash uint32) (note.Verifier, error) { return l.v, nil }

func TestOpenVerifiersErrors(t *testing.T) {
	k := newTestKeys(t, "log.example", 1)
	msg, _ := Sign(testCheckpoint("log.example", 1), k.logS)
	if _, err := Open(msg, ambiguousVerifiers{}); err == nil || errName(err) != "other: line 5: key log.example+"+fmt.Sprintf("%08x", k.logV.KeyHash())+": ambiguous" {
		t.Errorf("Open with failing Verifiers = %v", err)
	}
	if _, err := Open(msg, lyingVerifiers{k.ws[0].Verifier()}); err == nil {
		t.Error("Open accepted a verifier for another key")
	}
}

func TestNoteOrigin(t *testing.T) {
	k := newTestKeys(t, "log.example/x", 0)
	msg, _ := Sign(testCheckpoint("log.example/x", 1), k.logS)
	if o, err := NoteOrigin(msg); err != nil || o != "log.example/x" {
		t.Errorf("NoteOrigin = %q, %v", o, err)
	}
	if _, err := NoteOrigin([]byte("log.example/x\n01\n")); err == nil {
		t.Error("NoteOrigin accepted a note without signatures")
	}
}

func TestSignedAccessorsCopy(t *testing.T) {
	k := newTestKeys(t, "log.example", 0)
	cp := Checkpoint{Origin: "log.example", Size: 2, Root: [32]byte{1}, Extensions: []string{"e"}}
	msg, _ := Sign(cp, k.logS)
	s, err := Open(msg, note.VerifierList(k.logV))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Checkpoint()
	c.Extensions[0] = "changed"
	s.Text()[0] = 'X'
	s.Signatures()[0].Base64 = "x"
	if !bytes.Equal(s.Note(), msg) {
		t.Error("mutating accessor results changed the Signed")
	}
	if !s.SignedBy(k.logV) || len(s.Cosignatures()) != 0 {
		t.Error("SignedBy / Cosignatures wrong")
	}
}

func TestWithSignatures(t *testing.T) {
	const origin = "log.example"
	k := newTestKeys(t, origin, 2)
	cp := testCheckpoint(origin, 7)
	msg, _ := Sign(cp, k.logS)
	s, err := Open(msg, note.VerifierList(k.logV))
	if err != nil {
		t.Fatal(err)
	}
	known := note.VerifierList(k.logV, k.ws[0].Verifier(), k.ws[1].Verifier())

	// A witness response: its line plus a forged unknown line.
	resp, err := SignatureLines(cp, k.ws[0].At(time.Unix(100, 0)))
	if err != nil {
		t.Fatal(err)
	}
	forged := "\u2014 witness.example/evil " + base64.StdEncoding.EncodeToString(make([]byte, 76)) + "\n"
	s2, err := s.WithSignatures(append(bytes.Clone(resp), forged...), known)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(msg) + string(resp); string(s2.Note()) != want {
		t.Errorf("Note() =\n%s\nwant\n%s", s2.Note(), want)
	}
	if !bytes.Equal(s.Note(), msg) {
		t.Error("WithSignatures modified the receiver")
	}

	// Re-witnessing replaces the witness's older cosignature.
	resp2, _ := SignatureLines(cp, k.ws[0].At(time.Unix(200, 0)))
	s3, err := s2.WithSignatures(resp2, known)
	if err != nil {
		t.Fatal(err)
	}
	if cs := s3.Cosignatures(); len(cs) != 1 || cs[0].Time.Unix() != 200 {
		t.Errorf("after re-witnessing: %+v", cs)
	}
	if len(s3.Signatures()) != 2 {
		t.Errorf("after re-witnessing: %d signatures, want 2", len(s3.Signatures()))
	}

	// Errors.
	if _, err := s.WithSignatures([]byte(forged), known); !errors.Is(err, ErrUnverified) {
		t.Errorf("only unknown lines: %v", err)
	}
	if _, err := s.WithSignatures(corruptLine(t, resp), known); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("invalid line: %v", err)
	}
	other, _ := SignatureLines(testCheckpoint(origin, 8), k.ws[1])
	if _, err := s.WithSignatures(other, known); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("line for another checkpoint: %v", err)
	}
	for _, in := range []string{"", "\n", strings.TrimSuffix(string(resp), "\n"), "- x AAAAAAA=\n", "\u2014 x AAAAAAA=\r\n"} {
		if _, err := s.WithSignatures([]byte(in), known); !errors.Is(err, ErrMalformedNote) {
			t.Errorf("WithSignatures(%q) = %v", in, err)
		}
	}
}

func TestKeys(t *testing.T) {
	for _, name := range []string{"", "a b", "a+b", "a\u00a0b", "\xff"} {
		if _, _, err := GenerateLogKey(rand.Reader, name); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("GenerateLogKey(%q) = %v", name, err)
		}
		if _, _, err := GenerateCosignerKey(rand.Reader, name); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("GenerateCosignerKey(%q) = %v", name, err)
		}
		if _, err := CosignerVerifierKey(name, make([]byte, 32)); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("CosignerVerifierKey(%q) = %v", name, err)
		}
	}
	if _, err := CosignerVerifierKey("w", make([]byte, 31)); !errors.Is(err, ErrMalformedKey) {
		t.Errorf("CosignerVerifierKey(short key) = %v", err)
	}
	sk, vk, err := GenerateCosignerKey(rand.Reader, "w.example")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(sk)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(vk)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*Cosigner); !ok {
		t.Errorf("NewSigner(0x04) = %T", s)
	}
	if s.KeyHash() != v.KeyHash() || v.(*CosignatureVerifier).String() != vk {
		t.Error("cosigner key round trip failed")
	}
	for _, bad := range []string{"", "PRIVATE+KEY+", "PRIVATE+KEY+a+00000000+", "PRIVATE+KEY+a+0000000g+AQ==", sk + "x", strings.Replace(sk, "PRIVATE", "private", 1)} {
		if _, err := NewSigner(bad); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("NewSigner(%q) = %v", bad, err)
		}
	}
	short := fmt.Sprintf("PRIVATE+KEY+a+%08x+%s", 0, base64.StdEncoding.EncodeToString([]byte{4, 1, 2}))
	if _, err := NewSigner(short); !errors.Is(err, ErrMalformedKey) {
		t.Errorf("NewSigner(short seed) = %v", err)
	}
	unk := fmt.Sprintf("PRIVATE+KEY+a+%08x+%s", 0, base64.StdEncoding.EncodeToString(append([]byte{9}, make([]byte, 32)...)))
	if _, err := NewSigner(unk); !errors.Is(err, ErrUnsupportedKey) {
		t.Errorf("NewSigner(type 9) = %v", err)
	}
}

func TestSignerForOrigin(t *testing.T) {
	skey, _, err := GenerateLogKey(rand.Reader, "log.example")
	if err != nil {
		t.Fatal(err)
	}
	sa, vka, err := SignerForOrigin(skey, Origin("log.example", "a"))
	if err != nil {
		t.Fatal(err)
	}
	sb, vkb, err := SignerForOrigin(skey, Origin("log.example", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if sa.KeyHash() == sb.KeyHash() || vka == vkb {
		t.Error("tenants share a key ID")
	}
	va, _ := NewVerifier(vka)
	vb, _ := NewVerifier(vkb)
	msg, err := Sign(testCheckpoint("log.example/a", 4), sa)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(msg, note.VerifierList(va)); err != nil {
		t.Errorf("tenant a's note does not open with a's key: %v", err)
	}
	if _, err := Open(msg, note.VerifierList(vb)); !errors.Is(err, ErrUnverified) {
		t.Errorf("tenant a's note with b's key = %v", err)
	}
	if _, _, err := SignerForOrigin(skey, "bad origin"); !errors.Is(err, ErrMalformedKey) {
		t.Errorf("SignerForOrigin(bad origin) = %v", err)
	}
	csk, _, _ := GenerateCosignerKey(rand.Reader, "w")
	if _, _, err := SignerForOrigin(csk, "log.example"); !errors.Is(err, ErrUnsupportedKey) {
		t.Errorf("SignerForOrigin(cosigner key) = %v", err)
	}
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	k := newTestKeys(t, "log.example", 2)
	skey, vkey, _ := GenerateLogKey(rand.Reader, "log.example")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := LoadSigner(write("log.key", skey+"\n")); err != nil || s.Name() != "log.example" {
		t.Errorf("LoadSigner = %v, %v", s, err)
	}
	if s, err := LoadSigner(write("w.key", "  "+k.wsK[0]+"\r\n")); err != nil || s.KeyHash() != k.ws[0].KeyHash() {
		t.Errorf("LoadSigner(witness) = %v, %v", s, err)
	}
	if _, err := LoadSigner(write("bad.key", "nonsense")); !errors.Is(err, ErrMalformedKey) {
		t.Errorf("LoadSigner(bad) = %v", err)
	}
	if _, err := LoadSigner(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadSigner(missing) = %v", err)
	}
	if _, err := LoadSigner(write("big.key", strings.Repeat("x", maxKeyFileLen+1))); err == nil {
		t.Error("LoadSigner(huge file) succeeded")
	}
	vs, err := LoadVerifiers(write("keys", "# keys\n"+vkey+"\n\n  "+k.wvk[0]+"  \n"))
	if err != nil || len(vs) != 2 {
		t.Fatalf("LoadVerifiers = %v, %v", vs, err)
	}
	if _, err := LoadVerifiers(write("badkeys", vkey+"\nbroken\n")); !errors.Is(err, ErrMalformedKey) || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("LoadVerifiers(bad line 2) = %v", err)
	}
	pol := fmt.Sprintf("log %s\nwitness a %s\nwitness b %s\ngroup g any a b\nquorum g\n", vkey, k.wvk[0], k.wvk[1])
	p, err := LoadPolicy(write("policy", pol))
	if err != nil || len(p.Witnesses()) != 2 || len(p.Logs()) != 1 || !p.RequiresWitnesses() {
		t.Fatalf("LoadPolicy = %v, %v", p, err)
	}
	if _, err := LoadPolicy(write("badpolicy", "quorum x\n")); !errors.Is(err, ErrMalformedPolicy) {
		t.Errorf("LoadPolicy(bad) = %v", err)
	}
}

func TestThresholdPolicy(t *testing.T) {
	const origin = "log.example/t"
	k := newTestKeys(t, origin, 3)
	vs := []*CosignatureVerifier{k.ws[0].Verifier(), k.ws[1].Verifier(), k.ws[2].Verifier()}
	for _, bad := range []struct {
		k  int
		vs []*CosignatureVerifier
	}{{0, vs}, {4, vs}, {1, nil}, {-1, vs}, {1, []*CosignatureVerifier{vs[0], vs[0]}}, {1, []*CosignatureVerifier{vs[0], nil}}} {
		if _, err := NewThresholdPolicy(bad.k, bad.vs...); !errors.Is(err, ErrMalformedPolicy) {
			t.Errorf("NewThresholdPolicy(%d, %d witnesses) = %v", bad.k, len(bad.vs), err)
		}
	}
	p, err := NewThresholdPolicy(2, vs...)
	if err != nil {
		t.Fatal(err)
	}
	// The policy survives MarshalText / ParsePolicy.
	text, _ := p.MarshalText()
	var p2 Policy
	if err := p2.UnmarshalText(text); err != nil {
		t.Fatalf("re-parsing %q: %v", text, err)
	}
	if text2, _ := p2.MarshalText(); !bytes.Equal(text, text2) {
		t.Errorf("MarshalText not stable:\n%s\n%s", text, text2)
	}

	cp := testCheckpoint(origin, 9)
	one, _ := Sign(cp, k.logS, k.ws[0])
	two, _ := Sign(cp, k.logS, k.ws[2], k.ws[0])
	if _, err := p.Verify(one, k.logV); !errors.Is(err, ErrPolicyNotMet) {
		t.Errorf("Verify(1 of 3) = %v", err)
	}
	s, err := p.Verify(two, k.logV)
	if err != nil {
		t.Fatalf("Verify(2 of 3) = %v", err)
	}
	if len(s.Cosignatures()) != 2 || !s.SignedBy(k.logV) {
		t.Errorf("Verify result: %+v", s.Signatures())
	}
	for _, c := range []struct {
		name string
		logs []note.Verifier
		want error
	}{
		{"no log key", nil, ErrUnverified},
		{"witness key as log key", []note.Verifier{vs[0]}, ErrUnsupportedKey},
		{"log key twice", []note.Verifier{k.logV, k.logV}, ErrMalformedPolicy},
		{"nil log key", []note.Verifier{nil}, ErrUnverified},
	} {
		if _, err := p.Verify(two, c.logs...); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
	// The log key must be named after the origin.
	otherName := newTestKeys(t, "log.example/other", 0)
	msg, _ := Sign(cp, otherName.logS, k.ws[0], k.ws[1])
	if _, err := p.Verify(msg, otherName.logV); !errors.Is(err, ErrUnverified) {
		t.Errorf("Verify with a log key named for another origin = %v", err)
	}
	// Incoherent checkpoints signed through x/mod directly are refused after
	// the signatures verify.
	inc := Checkpoint{Origin: origin}
	raw, _ := note.Sign(&note.Note{Text: string(inc.Marshal())}, k.logS)
	if _, err := p.Verify(raw, k.logV); !errors.Is(err, ErrIncoherent) {
		t.Errorf("Verify(incoherent) = %v", err)
	}
	if _, err := p.Evaluate(raw); !errors.Is(err, ErrIncoherent) {
		t.Errorf("Evaluate(incoherent) = %v", err)
	}
}

func TestPolicyConcurrentUse(t *testing.T) {
	const origin = "log.example/c"
	k := newTestKeys(t, origin, 3)
	p, err := NewThresholdPolicy(2, k.ws[0].Verifier(), k.ws[1].Verifier(), k.ws[2].Verifier())
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := Sign(testCheckpoint(origin, 9), k.logS, k.ws[0], k.ws[1])
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if _, err := p.Verify(msg, k.logV); err != nil {
					t.Error(err)
				}
				if ev, err := p.Evaluate(msg); err != nil || !ev.Met {
					t.Error(ev, err)
				}
			}
		})
	}
	wg.Wait()
}

// corruptLine flips a bit in the signature (not the key ID) of the last
// signature line of msg, keeping the line well-formed.
func corruptLine(t *testing.T, msg []byte) []byte {
	t.Helper()
	i := bytes.LastIndex(msg[:len(msg)-1], []byte("\n")) + 1
	sl, err := parseSigLine(1, string(msg[i:len(msg)-1]))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(sl.b64)
	raw[len(raw)-1] ^= 1
	out := append(bytes.Clone(msg[:i]), sigPrefix+sl.name+" "+base64.StdEncoding.EncodeToString(raw)+"\n"...)
	return out
}

func TestZeroPolicyRefuses(t *testing.T) {
	k := newTestKeys(t, "log.example/z", 0)
	msg, _ := Sign(testCheckpoint("log.example/z", 1), k.logS)
	var p Policy
	if _, err := p.Verify(msg, k.logV); !errors.Is(err, ErrMalformedPolicy) {
		t.Errorf("zero Policy Verify = %v", err)
	}
	if _, err := p.Evaluate(msg); !errors.Is(err, ErrMalformedPolicy) {
		t.Errorf("zero Policy Evaluate = %v", err)
	}
	if _, err := p.MarshalText(); !errors.Is(err, ErrMalformedPolicy) {
		t.Errorf("zero Policy MarshalText = %v", err)
	}
	if !p.RequiresWitnesses() {
		t.Error("zero Policy claims to need no witnesses")
	}
}
