package checkpoint

// Interoperability with the public implementations: golang.org/x/mod's note
// package and github.com/transparency-dev/formats. Our notes must open with
// theirs, and their cosignatures must verify with ours.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	flog "github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	fwitness "github.com/transparency-dev/formats/witness"
	"golang.org/x/mod/sumdb/note"
)

type testKeys struct {
	logS  note.Signer
	logV  note.Verifier
	logVK string
	ws    []*Cosigner
	wsK   []string // skeys
	wvk   []string // vkeys
}

func newTestKeys(t testing.TB, origin string, witnesses int) *testKeys {
	t.Helper()
	skey, vkey, err := GenerateLogKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	k := &testKeys{logVK: vkey}
	if k.logS, err = NewSigner(skey); err != nil {
		t.Fatal(err)
	}
	if k.logV, err = NewVerifier(vkey); err != nil {
		t.Fatal(err)
	}
	for i := range witnesses {
		sk, vk, err := GenerateCosignerKey(rand.Reader, fmt.Sprintf("witness.example/w%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCosigner(sk)
		if err != nil {
			t.Fatal(err)
		}
		k.ws = append(k.ws, c)
		k.wsK = append(k.wsK, sk)
		k.wvk = append(k.wvk, vk)
	}
	return k
}

func testCheckpoint(origin string, size uint64) Checkpoint {
	cp := Checkpoint{Origin: origin, Size: size}
	if size == 0 {
		cp.Root = EmptyRoot()
	} else {
		copy(cp.Root[:], fmt.Sprintf("root of %s at %d................", origin, size))
	}
	return cp
}

func TestInteropXModNoteOpensOurNotes(t *testing.T) {
	const origin = "log.example/runseal/acme"
	k := newTestKeys(t, origin, 2)
	for _, cp := range []Checkpoint{
		testCheckpoint(origin, 0),
		testCheckpoint(origin, 1),
		testCheckpoint(origin, 1<<40),
		{Origin: origin, Size: 7, Root: [32]byte{1, 2, 3}, Extensions: []string{"ext a", "ext b"}},
	} {
		msg, err := Sign(cp, k.logS, k.ws[0], k.ws[1])
		if err != nil {
			t.Fatal(err)
		}
		// x/mod with its own verifier for the log key and ours for witnesses.
		xv, err := note.NewVerifier(k.logVK)
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open(msg, note.VerifierList(xv, k.ws[0].Verifier(), k.ws[1].Verifier()))
		if err != nil {
			t.Fatalf("note.Open: %v", err)
		}
		if n.Text != string(cp.Marshal()) || len(n.Sigs) != 3 || len(n.UnverifiedSigs) != 0 {
			t.Errorf("note.Open = %+v", n)
		}
		s, err := Open(msg, note.VerifierList(k.logV, k.ws[0].Verifier(), k.ws[1].Verifier()))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Signatures(), n.Sigs) {
			t.Errorf("Open signatures %v, note.Open %v", s.Signatures(), n.Sigs)
		}
	}
}

func TestInteropFormatsParseCheckpoint(t *testing.T) {
	const origin = "log.example/runseal/acme"
	k := newTestKeys(t, origin, 1)
	cp := testCheckpoint(origin, 12345)
	msg, err := Sign(cp, k.logS, k.ws[0])
	if err != nil {
		t.Fatal(err)
	}
	wv, err := fnote.NewVerifierForCosignatureV1(k.wvk[0])
	if err != nil {
		t.Fatal(err)
	}
	fcp, other, n, err := flog.ParseCheckpoint(msg, origin, k.logV, wv)
	if err != nil {
		t.Fatalf("formats log.ParseCheckpoint: %v", err)
	}
	if fcp.Origin != cp.Origin || fcp.Size != cp.Size || !bytes.Equal(fcp.Hash, cp.Root[:]) || len(other) != 0 {
		t.Errorf("formats parsed %+v, %q; want %+v", fcp, other, cp)
	}
	if len(n.Sigs) != 2 {
		t.Errorf("formats verified %d signatures, want 2 (log and witness)", len(n.Sigs))
	}
	if !bytes.Equal(fcp.Marshal(), cp.Marshal()) {
		t.Errorf("formats Marshal %q, ours %q", fcp.Marshal(), cp.Marshal())
	}
}

func TestInteropFormatsVerifiesOurCosignatures(t *testing.T) {
	const origin = "log.example/runseal"
	k := newTestKeys(t, origin, 1)
	at := time.Unix(1750000000, 0)
	for _, cp := range []Checkpoint{
		testCheckpoint(origin, 0),
		testCheckpoint(origin, 99),
		{Origin: origin, Size: 3, Root: [32]byte{9}, Extensions: []string{"x"}},
	} {
		msg, err := Sign(cp, k.logS, k.ws[0].At(at))
		if err != nil {
			t.Fatal(err)
		}
		fv, err := fnote.NewVerifierForCosignatureV1(k.wvk[0])
		if err != nil {
			t.Fatal(err)
		}
		if fv.KeyHash() != k.ws[0].KeyHash() {
			t.Fatalf("formats key ID %08x, ours %08x", fv.KeyHash(), k.ws[0].KeyHash())
		}
		n, err := note.Open(msg, note.VerifierList(fv))
		if err != nil {
			t.Fatalf("note.Open with formats cosignature verifier: %v", err)
		}
		ts, err := fnote.CoSigV1Timestamp(n.Sigs[0])
		if err != nil || !ts.Equal(at) {
			t.Errorf("formats CoSigV1Timestamp = %v, %v; want %v", ts, err, at)
		}
		ours, err := CosignatureTime(n.Sigs[0])
		if err != nil || !ours.Equal(at) {
			t.Errorf("CosignatureTime = %v, %v; want %v", ours, err, at)
		}
		// formats' generic NewVerifier dispatches on the 0x04 type byte too.
		gv, err := fnote.NewVerifier(k.wvk[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := note.Open(msg, note.VerifierList(gv)); err != nil {
			t.Errorf("note.Open with formats NewVerifier: %v", err)
		}
	}
}

func TestInteropWeVerifyFormatsCosignatures(t *testing.T) {
	const origin = "log.example/runseal"
	k := newTestKeys(t, origin, 1)
	// formats signs with our witness signer key (type 0x04).
	fs, err := fnote.NewSignerForCosignatureV1(k.wsK[0])
	if err != nil {
		t.Fatal(err)
	}
	if fs.KeyHash() != k.ws[0].KeyHash() || fs.Name() != k.ws[0].Name() {
		t.Fatalf("formats signer %s+%08x, ours %s+%08x", fs.Name(), fs.KeyHash(), k.ws[0].Name(), k.ws[0].KeyHash())
	}
	cp := testCheckpoint(origin, 42)
	before := time.Now().Add(-time.Second)
	msg, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, k.logS, fs)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Second)
	v, err := NewCosignatureVerifier(k.wvk[0])
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(msg, note.VerifierList(k.logV, v))
	if err != nil {
		t.Fatalf("Open of a formats cosignature: %v", err)
	}
	cs := s.Cosignatures()
	if len(cs) != 1 || cs[0].Time.Before(before) || cs[0].Time.After(after) {
		t.Errorf("Cosignatures = %+v, want one between %v and %v", cs, before, after)
	}
	// And through a policy.
	p, err := NewThresholdPolicy(1, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Verify(msg, k.logV); err != nil {
		t.Errorf("Policy.Verify: %v", err)
	}
	// formats' verifier made from its own signer verifies ours.
	ours, err := Sign(cp, k.logS, k.ws[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(ours, note.VerifierList(fs.Verifier())); err != nil {
		t.Errorf("formats signer's verifier rejects our cosignature: %v", err)
	}
}

// TestInteropFormatsPolicyAgrees checks that our evaluation of a policy file
// agrees with formats' witness.ParsePolicy on which notes satisfy it.
func TestInteropFormatsPolicyAgrees(t *testing.T) {
	const origin = "log.example/runseal"
	k := newTestKeys(t, origin, 4)
	text := fmt.Sprintf("witness a %s https://a.example\nwitness b %s https://b.example\nwitness c %s https://c.example\nwitness d %s https://d.example\n"+
		"group ab any a b\ngroup cd all c d\ngroup q 1 ab cd\nquorum q\n", k.wvk[0], k.wvk[1], k.wvk[2], k.wvk[3])
	ours, err := ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := fwitness.ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cp := testCheckpoint(origin, 10)
	for mask := range 16 {
		signers := []note.Signer{k.logS}
		for i := range 4 {
			if mask&(1<<i) != 0 {
				signers = append(signers, k.ws[i])
			}
		}
		msg, err := Sign(cp, signers...)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := ours.Evaluate(msg)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ev.Met, theirs.Satisfied(msg); got != want {
			t.Errorf("witnesses %04b: our Met = %v, formats Satisfied = %v", mask, got, want)
		}
	}
}

// TestInteropNoteSignTrap shows the x/mod behaviour the package guards
// against: note.Sign re-emits an unverified signature line, Signed.Note
// does not.
func TestInteropNoteSignTrap(t *testing.T) {
	const origin = "log.example/runseal"
	k := newTestKeys(t, origin, 1)
	cp := testCheckpoint(origin, 5)
	msg, err := Sign(cp, k.logS)
	if err != nil {
		t.Fatal(err)
	}
	// A forged line claiming to be witness w1, added by an attacker.
	forged := append(bytes.Clone(msg), []byte("\u2014 witness.example/w1 "+base64.StdEncoding.EncodeToString(make([]byte, 76))+"\n")...)

	n, err := note.Open(forged, note.VerifierList(k.logV))
	if err != nil {
		t.Fatal(err)
	}
	resigned, err := note.Sign(n) // what a naive store would write back
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(resigned, []byte("witness.example/w1")) {
		t.Fatal("x/mod note.Sign no longer re-emits unverified signatures; update the package docs")
	}

	s, err := Open(forged, note.VerifierList(k.logV))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(s.Note(), []byte("witness.example/w1")) {
		t.Fatalf("Signed.Note re-emitted a forged line:\n%s", s.Note())
	}
	if !bytes.Equal(s.Note(), msg) {
		t.Errorf("Signed.Note =\n%s\nwant\n%s", s.Note(), msg)
	}
}

// TestInteropVectors opens every accepted vector note with x/mod's note.Open
// and formats' verifiers only, so the vectors are checked by code that is
// not ours, and compares what verified.
func TestInteropVectors(t *testing.T) {
	vf := loadVectors(t)
	theirVerifier := func(t *testing.T, id string) note.Verifier {
		i := slices.IndexFunc(vf.Keys, func(k vecKey) bool { return k.ID == id })
		v, err := fnote.NewVerifier(vf.Keys[i].VKey) // x/mod for 0x01, formats for 0x04
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, v := range vf.Open {
		if v.Result != "ok" {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			var vs []note.Verifier
			for _, id := range v.Keys {
				vs = append(vs, theirVerifier(t, id))
			}
			n, err := note.Open([]byte(v.Note), note.VerifierList(vs...))
			if err != nil {
				t.Fatalf("note.Open: %v", err)
			}
			var ids []string
			for _, s := range n.Sigs {
				ids = append(ids, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
				if ts, err := fnote.CoSigV1Timestamp(s); err == nil && strings.HasPrefix(s.Name, "witness.") {
					if !slices.Contains(v.CosigTimes, ts.Unix()) {
						t.Errorf("formats timestamp %d not in %v", ts.Unix(), v.CosigTimes)
					}
				}
			}
			if !slices.Equal(ids, v.Verified) {
				t.Errorf("note.Open verified %q, vectors say %q", ids, v.Verified)
			}
			// The rebuilt note must open the same way and carry no unverified line.
			n2, err := note.Open([]byte(v.Rebuilt), note.VerifierList(vs...))
			if err != nil {
				t.Fatalf("note.Open(rebuilt): %v", err)
			}
			if len(n2.UnverifiedSigs) != 0 || len(n2.Sigs) != len(n.Sigs) {
				t.Errorf("rebuilt note: %d verified, %d unverified", len(n2.Sigs), len(n2.UnverifiedSigs))
			}
		})
	}
	for _, v := range vf.Cosignatures {
		t.Run(v.Name, func(t *testing.T) {
			fcp, _, n, err := flog.ParseCheckpoint([]byte(v.Note), "log.example/runseal/acme", theirVerifier(t, "log-acme"), theirVerifier(t, v.Signer))
			if err != nil {
				t.Fatalf("formats ParseCheckpoint: %v", err)
			}
			if len(n.Sigs) != 2 || !strings.HasPrefix(v.Body, string(fcp.Marshal())) {
				t.Errorf("formats: %d signatures, checkpoint %q", len(n.Sigs), fcp.Marshal())
			}
		})
	}
}
