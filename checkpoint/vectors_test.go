package checkpoint

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

func loadVectors(t testing.TB) *vectorFile {
	t.Helper()
	b, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vf); err != nil {
		t.Fatalf("%s: %v", vectorsPath, err)
	}
	return &vf
}

// errName maps an error to the result names used in the vectors.
func errName(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{
		{ErrMalformedCheckpoint, "malformed_checkpoint"},
		{ErrMalformedNote, "malformed_note"},
		{ErrInvalidSignature, "invalid_signature"},
		{ErrUnverified, "unverified"},
		{ErrIncoherent, "incoherent"},
		{ErrPolicyNotMet, "policy_not_met"},
		{ErrMalformedKey, "malformed_key"},
		{ErrUnsupportedKey, "unsupported_key"},
		{ErrMalformedPolicy, "malformed_policy"},
	} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	if err == nil {
		return "ok"
	}
	return "other: " + err.Error()
}

func vecText(t *testing.T, s, b64 string) []byte {
	t.Helper()
	if b64 == "" {
		return []byte(s)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func vecVerifiers(t *testing.T, vf *vectorFile, ids []string) []note.Verifier {
	t.Helper()
	var vs []note.Verifier
	for _, id := range ids {
		i := slices.IndexFunc(vf.Keys, func(k vecKey) bool { return k.ID == id })
		if i < 0 {
			t.Fatalf("no key %q in vectors", id)
		}
		v, err := NewVerifier(vf.Keys[i].VKey)
		if err != nil {
			t.Fatalf("key %s: %v", id, err)
		}
		vs = append(vs, v)
	}
	return vs
}

func vecSigner(t *testing.T, vf *vectorFile, id string) note.Signer {
	t.Helper()
	i := slices.IndexFunc(vf.Keys, func(k vecKey) bool { return k.ID == id })
	if i < 0 {
		t.Fatalf("no key %q in vectors", id)
	}
	s, err := NewSigner(vf.Keys[i].SKey)
	if err != nil {
		t.Fatalf("key %s: %v", id, err)
	}
	return s
}

func checkSyntaxErr(t *testing.T, err error, line int, field string) {
	t.Helper()
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *SyntaxError", err)
	}
	if line != 0 && se.Line != line {
		t.Errorf("error %q: line %d, want %d", err, se.Line, line)
	}
	if field != "" && se.Field != field {
		t.Errorf("error %q: field %q, want %q", err, se.Field, field)
	}
}

func TestVectorsEmptyRoot(t *testing.T) {
	vf := loadVectors(t)
	r := EmptyRoot()
	if got := base64.StdEncoding.EncodeToString(r[:]); got != vf.EmptyRoot {
		t.Fatalf("EmptyRoot = %s, want %s", got, vf.EmptyRoot)
	}
}

func TestVectorsOrigins(t *testing.T) {
	for _, v := range loadVectors(t).Origins {
		if got := Origin(v.LogOrigin, v.Tenant); got != v.Origin {
			t.Errorf("Origin(%q, %q) = %q, want %q", v.LogOrigin, v.Tenant, got, v.Origin)
		}
	}
}

func TestVectorsBodies(t *testing.T) {
	for _, v := range loadVectors(t).Bodies {
		t.Run(v.Name, func(t *testing.T) {
			text := vecText(t, v.Text, v.TextB64)
			cp, err := Parse(text)
			if !v.Valid {
				if !errors.Is(err, ErrMalformedCheckpoint) {
					t.Fatalf("Parse = %+v, %v; want %s at line %d (%s)", cp, err, "malformed_checkpoint", v.Line, v.Reason)
				}
				checkSyntaxErr(t, err, v.Line, v.Field)
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			size, _ := strconv.ParseUint(v.Size, 10, 64)
			root, _ := base64.StdEncoding.DecodeString(v.Root)
			if cp.Origin != v.Origin || cp.Size != size || !bytes.Equal(cp.Root[:], root) || !slices.Equal(cp.Extensions, v.Extensions) {
				t.Errorf("Parse = %+v, want origin %q size %s root %s extensions %q", cp, v.Origin, v.Size, v.Root, v.Extensions)
			}
			if got := cp.Marshal(); !bytes.Equal(got, text) {
				t.Errorf("Marshal = %q, want %q", got, text)
			}
			if err := cp.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if err := cp.Coherent(); (err == nil) != v.Coherent {
				t.Errorf("Coherent = %v, want coherent %v", err, v.Coherent)
			} else if err != nil && !errors.Is(err, ErrIncoherent) {
				t.Errorf("Coherent error %v does not wrap ErrIncoherent", err)
			}
		})
	}
}

func TestVectorsKeyStrings(t *testing.T) {
	for _, v := range loadVectors(t).KeyStrings {
		t.Run(v.Name, func(t *testing.T) {
			var errs []error
			if v.VKey != "" {
				var (
					nv  note.Verifier
					err error
				)
				switch v.Use {
				case "witness":
					nv, err = NewCosignatureVerifier(v.VKey)
				case "log":
					nv, err = NewVerifier(v.VKey)
					if err == nil {
						if _, ok := nv.(*CosignatureVerifier); ok {
							err = fmt.Errorf("%w: witness key", ErrUnsupportedKey)
						}
					}
				default:
					nv, err = NewVerifier(v.VKey)
				}
				if err == nil && v.KeyID != "" && fmt.Sprintf("%08x", nv.KeyHash()) != v.KeyID {
					t.Errorf("key ID %08x, want %s", nv.KeyHash(), v.KeyID)
				}
				errs = append(errs, err)
			}
			if v.SKey != "" {
				var (
					s   note.Signer
					err error
				)
				if v.Use == "witness" {
					s, err = NewCosigner(v.SKey)
				} else {
					s, err = NewSigner(v.SKey)
				}
				if err == nil && v.KeyID != "" && fmt.Sprintf("%08x", s.KeyHash()) != v.KeyID {
					t.Errorf("signer key ID %08x, want %s", s.KeyHash(), v.KeyID)
				}
				errs = append(errs, err)
			}
			for _, err := range errs {
				want := v.Error
				if want == "" {
					want = "ok"
				}
				if got := errName(err); got != want {
					t.Errorf("got %s (%v), want %s", got, err, want)
				}
			}
			if v.CosigKey != "" {
				_, _, _, key, err := parseVerifierKey(v.VKey)
				if err != nil {
					t.Fatal(err)
				}
				vk, err := CosignerVerifierKey("example.com/foo", key)
				if err != nil {
					t.Fatal(err)
				}
				if vk != v.CosigVKey {
					t.Errorf("CosignerVerifierKey = %s, want %s", vk, v.CosigVKey)
				}
				cv, err := NewCosignatureVerifier(vk)
				if err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprintf("%08x", cv.KeyHash()); got != v.CosigKey {
					t.Errorf("cosignature key ID %s, want %s", got, v.CosigKey)
				}
			}
		})
	}
}

func TestVectorsSigned(t *testing.T) {
	vf := loadVectors(t)
	for _, v := range vf.Signed {
		t.Run(v.Name, func(t *testing.T) {
			cp, err := Parse([]byte(v.Body))
			if err != nil {
				t.Fatal(err)
			}
			var signers []note.Signer
			for _, id := range v.Signers {
				signers = append(signers, vecSigner(t, vf, id))
			}
			got, err := Sign(cp, signers...)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != v.Note {
				t.Fatalf("Sign =\n%s\nwant\n%s", got, v.Note)
			}
			s, err := Open(got, note.VerifierList(vecVerifiers(t, vf, v.Signers)...))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(s.Note(), got) {
				t.Errorf("Note() =\n%s\nwant\n%s", s.Note(), got)
			}
		})
	}
}

func TestVectorsCosignatures(t *testing.T) {
	vf := loadVectors(t)
	for _, v := range vf.Cosignatures {
		t.Run(v.Name, func(t *testing.T) {
			cp, err := Parse([]byte(v.Body))
			if err != nil {
				t.Fatal(err)
			}
			if got := appendCosignedMessage(nil, v.Time, []byte(v.Body)); string(got) != v.Message {
				t.Errorf("signed message %q, want %q", got, v.Message)
			}
			c := vecSigner(t, vf, v.Signer).(*Cosigner).At(time.Unix(int64(v.Time), 0))
			lines, err := SignatureLines(cp, c)
			if err != nil {
				t.Fatal(err)
			}
			if string(lines) != v.SignatureLine {
				t.Errorf("SignatureLines = %q, want %q", lines, v.SignatureLine)
			}
			got, err := Sign(cp, vecSigner(t, vf, "log-acme"), c)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != v.Note {
				t.Errorf("Sign =\n%s\nwant\n%s", got, v.Note)
			}
			s, err := Open([]byte(v.Note), note.VerifierList(vecVerifiers(t, vf, []string{"log-acme", v.Signer})...))
			if err != nil {
				t.Fatal(err)
			}
			cs := s.Cosignatures()
			if len(cs) != 1 || cs[0].Time.Unix() != int64(v.Time) || cs[0].Name != c.Name() || cs[0].KeyHash != c.KeyHash() {
				t.Errorf("Cosignatures = %+v, want one by %s at %d", cs, c.Name(), v.Time)
			}
		})
	}
}

func TestVectorsCosignatureTimes(t *testing.T) {
	for _, v := range loadVectors(t).CosignatureTime {
		t.Run(v.Name, func(t *testing.T) {
			sl, err := parseSigLine(1, v.Line)
			if err != nil {
				t.Fatal(err)
			}
			got, err := CosignatureTime(note.Signature{Name: sl.name, Hash: sl.hash, Base64: sl.b64})
			if v.Error != "" {
				if errName(err) != v.Error {
					t.Fatalf("CosignatureTime = %v, %v; want %s", got, err, v.Error)
				}
				return
			}
			if err != nil || got.Unix() != v.Time {
				t.Fatalf("CosignatureTime = %v (%d), %v; want %d", got, got.Unix(), err, v.Time)
			}
		})
	}
}

func TestVectorsOpen(t *testing.T) {
	vf := loadVectors(t)
	for _, v := range vf.Open {
		t.Run(v.Name, func(t *testing.T) {
			msg := vecText(t, v.Note, v.NoteB64)
			s, err := Open(msg, note.VerifierList(vecVerifiers(t, vf, v.Keys)...))
			if got := errName(err); got != v.Result {
				t.Fatalf("Open: %s (%v), want %s: %s", got, err, v.Result, v.Explanation)
			}
			if err != nil {
				if v.Line != 0 || v.Field != "" {
					checkSyntaxErr(t, err, v.Line, v.Field)
				}
				if s != nil {
					t.Errorf("Open returned a Signed with an error")
				}
				return
			}
			var ids []string
			for _, sig := range s.Signatures() {
				ids = append(ids, fmt.Sprintf("%s+%08x", sig.Name, sig.Hash))
			}
			if !slices.Equal(ids, v.Verified) {
				t.Errorf("verified %q, want %q", ids, v.Verified)
			}
			var times []int64
			for _, c := range s.Cosignatures() {
				times = append(times, c.Time.Unix())
			}
			if !slices.Equal(times, v.CosigTimes) {
				t.Errorf("cosignature times %v, want %v", times, v.CosigTimes)
			}
			if got := s.Note(); string(got) != v.Rebuilt {
				t.Errorf("Note() =\n%s\nwant\n%s", got, v.Rebuilt)
			}
		})
	}
}

func vecPolicyByName(t *testing.T, vf *vectorFile, name string) *Policy {
	t.Helper()
	i := slices.IndexFunc(vf.Policies, func(p vecPolicy) bool { return p.Name == name })
	if i < 0 {
		t.Fatalf("no policy %q", name)
	}
	p, err := ParsePolicy([]byte(vf.Policies[i].Policy))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVectorsPolicies(t *testing.T) {
	for _, v := range loadVectors(t).Policies {
		t.Run(v.Name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(v.Policy))
			if !v.Valid {
				if !errors.Is(err, ErrMalformedPolicy) {
					t.Fatalf("ParsePolicy = %v, want malformed_policy (%s)", err, v.Reason)
				}
				checkSyntaxErr(t, err, v.Line, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := p.MarshalText()
			if string(got) != v.Canonical {
				t.Errorf("MarshalText =\n%s\nwant\n%s", got, v.Canonical)
			}
		})
	}
}

func TestVectorsPolicyChecks(t *testing.T) {
	vf := loadVectors(t)
	for _, v := range vf.PolicyChecks {
		t.Run(v.Name, func(t *testing.T) {
			p := vecPolicyByName(t, vf, v.Policy)
			ev, err := p.Evaluate([]byte(v.Note))
			if err != nil {
				t.Fatal(err)
			}
			var cosigned, invalid []string
			for _, w := range ev.Witnesses {
				if w.Cosigned {
					cosigned = append(cosigned, w.Name)
					if w.Time.IsZero() {
						t.Errorf("witness %s cosigned without a time", w.Name)
					}
				}
				if w.Invalid {
					invalid = append(invalid, w.Name)
				}
			}
			if ev.Met != v.Met || !slices.Equal(cosigned, v.Cosigned) || !slices.Equal(invalid, v.Invalid) {
				t.Errorf("Evaluate: met %v cosigned %q invalid %q; want met %v cosigned %q invalid %q",
					ev.Met, cosigned, invalid, v.Met, v.Cosigned, v.Invalid)
			}
			if ev.Cosigned() != len(v.Cosigned) {
				t.Errorf("Cosigned() = %d, want %d", ev.Cosigned(), len(v.Cosigned))
			}
			s, err := p.Verify([]byte(v.Note), vecVerifiers(t, vf, v.Logs)...)
			if got := errName(err); got != v.Verify {
				t.Fatalf("Verify: %s (%v), want %s", got, err, v.Verify)
			}
			if err == nil {
				// The verified note must open with x/mod and carry nothing unverified.
				if _, err := note.Open(s.Note(), note.VerifierList(vecVerifiers(t, vf, []string{"log-acme"})...)); err != nil {
					t.Errorf("note.Open(Verify().Note()): %v", err)
				}
			}
		})
	}
}
