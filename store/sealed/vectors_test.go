package sealed_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// The vectors of spec/sealing.md, section "Vectors".
const (
	vecScope    = "default/case/01M8SNY25MTQ9VP1YG42CGNP5M"
	vecAD       = "72756e7365616c207365616c65642076310000000764656661756c740000001a30314d38534e5932354d5451395650315947343243474e50354b000000013300000005696e707574"
	vecWrapped  = "01202122232425262728292a2b2c2d2e2f3031323334353637ec7e20fd06e39b05b9adf5fe4db5f6cc4ab8e0f3cb261d73a48f7b4162cc93d097488732d2bec84cbc2a636b80b1cac9"
	vecEnvelope = "sealed:AQBJASAhIiMkJSYnKCkqKywtLi8wMTIzNDU2N-x-IP0G45sFua31_k219sxKuODzyyYdc6SPe0FizJPQl0iHMtK-yEy8KmNrgLHKyUBBQkNERUZHSElKS0xNTk9QUVJTVFVWV68baxG9hVssrbXj343ha6Ss1tJgCozJB8Rd8KAEMQ"
	vecRecord   = `{"case":"01M8SNY25MTQ9VP1YG42CGNP5M","epoch":1,"input":"` + vecEnvelope + `","kind":"Note","run":"01M8SNY25MTQ9VP1YG42CGNP5K","seq":3,"v":1}`
)

func counting(from, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(from + i)
	}
	return b
}

func TestVectors(t *testing.T) {
	run, _ := store.ParseRunID("01M8SNY25MTQ9VP1YG42CGNP5K")
	c, _ := store.ParseCaseID("01M8SNY25MTQ9VP1YG42CGNP5M")
	if got := sealed.CaseScope("default", c); got != vecScope {
		t.Errorf("scope = %s, want %s", got, vecScope)
	}
	if got := hex.EncodeToString(sealed.AssociatedData("default", run, 3, "input")); got != vecAD {
		t.Errorf("associated data = %s\nwant %s", got, vecAD)
	}
	wrapped, _ := hex.DecodeString(vecWrapped)
	dataKey, nonce := counting(0, 32), counting(0x40, 24)
	a, _ := chacha20poly1305.NewX(dataKey)
	ad, _ := hex.DecodeString(vecAD)
	env := sealed.Envelope{Wrapped: wrapped, Nonce: nonce, Ciphertext: a.Seal(nil, nonce, []byte(`{"name":"Ada"}`), ad)}
	if got := env.Marshal(); got != vecEnvelope {
		t.Errorf("envelope = %s\nwant %s", got, vecEnvelope)
	}
	// The appends' path seals into the envelope's own buffer: same bytes.
	if got := sealed.SealEnvelope(a, wrapped, nonce, []byte(`{"name":"Ada"}`), ad); got != vecEnvelope {
		t.Errorf("sealed in place: envelope = %s\nwant %s", got, vecEnvelope)
	}
	back, err := sealed.ParseEnvelope(vecEnvelope)
	if err != nil || !bytes.Equal(back.Wrapped, wrapped) || !bytes.Equal(back.Nonce, nonce) {
		t.Fatalf("ParseEnvelope = %+v, %v", back, err)
	}

	// The file ring, holding the vector's scope key, unwraps the data key,
	// and a sealing journal opens the vector record to the plaintext.
	dir := filepath.Join(t.TempDir(), "ring")
	ring, err := keyring.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	kp := filepath.Join(dir, "default", "case", "01M8SNY25MTQ9VP1YG42CGNP5M.key")
	os.MkdirAll(filepath.Dir(kp), 0o700)
	if err := os.WriteFile(kp, counting(0x80, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ring.Unwrap(context.Background(), vecScope, wrapped)
	if err != nil || !bytes.Equal(got, dataKey) {
		t.Fatalf("Unwrap = %x, %v", got, err)
	}
	s, _ := openSQLite(t)
	j := sealed.New(s, ring, sealed.Options{})
	fs, err := j.Fields(context.Background(), store.Record{Body: store.Body{Run: run, Seq: 3}, Raw: []byte(vecRecord)})
	if err != nil || len(fs) != 1 || fs[0].State != sealed.Opened || string(fs[0].Value) != `{"name":"Ada"}` {
		t.Fatalf("Fields(vector record) = %+v, %v", fs, err)
	}
}

// FuzzParseEnvelope: the envelope parser takes outside bytes (a journal
// copy, a disclosure package); it must never panic and must accept only
// what it would write.
func FuzzParseEnvelope(f *testing.F) {
	f.Add(vecEnvelope)
	f.Add("sealed:")
	f.Add("sealed:AQAA")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := sealed.ParseEnvelope(s)
		if err != nil {
			return
		}
		if e.Marshal() != s {
			t.Fatalf("ParseEnvelope accepted %q, which re-marshals as %q", s, e.Marshal())
		}
	})
}
