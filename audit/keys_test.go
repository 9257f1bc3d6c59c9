package audit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
)

const origin = "example.com/log"

type testKeys struct {
	log, log2, w1, w2, disc string
}

func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	var k testKeys
	var err error
	if _, k.log, err = checkpoint.GenerateLogKey(rand.Reader, origin); err != nil {
		t.Fatal(err)
	}
	if _, k.log2, err = checkpoint.GenerateLogKey(rand.Reader, origin); err != nil {
		t.Fatal(err)
	}
	if _, k.w1, err = checkpoint.GenerateCosignerKey(rand.Reader, "w1.example"); err != nil {
		t.Fatal(err)
	}
	if _, k.w2, err = checkpoint.GenerateCosignerKey(rand.Reader, "w2.example"); err != nil {
		t.Fatal(err)
	}
	if _, k.disc, err = checkpoint.GenerateLogKey(rand.Reader, origin+disclosure.DisclosureKeySuffix); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeysTrust(t *testing.T) {
	k := newTestKeys(t)
	policy := []byte(fmt.Sprintf("log %s\nwitness w1 %s\nwitness w2 %s\ngroup both 2 w1 w2\nquorum both\n", k.log, k.w1, k.w2))
	tests := []struct {
		name       string
		keys       Keys
		field      string // "" means no error
		index      int
		conflict   bool // the error also matches disclosure.ErrKeyConflict
		wantInText string
		discKeys   int // disclosure keys kept when not len(keys.Disclosure)
	}{
		{name: "witnesses", keys: Keys{Logs: []string{k.log}, Witnesses: []string{k.w1, k.w2}, Disclosure: []string{k.disc}}},
		{name: "policy", keys: Keys{Policy: policy, Disclosure: []string{k.disc}}},
		{name: "policy and the same log key", keys: Keys{Logs: []string{k.log}, Policy: policy}},
		{name: "malformed log key", keys: Keys{Logs: []string{k.log, "not a key"}}, field: FieldLogKey, index: 1, wantInText: `"not a key"`},
		{name: "witness key as log key", keys: Keys{Logs: []string{k.w1}}, field: FieldLogKey, index: 0, conflict: true, wantInText: "give it with --witness"},
		{name: "policy and witnesses", keys: Keys{Logs: []string{k.log}, Policy: policy, Witnesses: []string{k.w1}}, field: FieldPolicy, index: -1},
		{name: "quorum without witnesses", keys: Keys{Logs: []string{k.log}, Quorum: 1}, field: FieldQuorum, index: -1},
		{name: "quorum above witnesses", keys: Keys{Logs: []string{k.log}, Witnesses: []string{k.w1}, Quorum: 2}, field: FieldQuorum, index: -1},
		{name: "malformed policy", keys: Keys{Logs: []string{k.log}, Policy: []byte("quorum nobody\n"), PolicyName: "p.txt"}, field: FieldPolicy, index: -1, wantInText: "p.txt"},
		{name: "log key as witness", keys: Keys{Logs: []string{k.log}, Witnesses: []string{k.log}}, field: FieldWitness, index: 0},
		{name: "no log key", keys: Keys{Witnesses: []string{k.w1}}, field: FieldLogKey, index: -1},
		{name: "key ID of another key", keys: Keys{Logs: []string{sameName(k.log2, k.log)}, Policy: policy}, field: FieldLogKey, index: 0},
		{name: "disclosure key is the log key", keys: Keys{Logs: []string{k.log}, Disclosure: []string{k.log}}, field: FieldDisclosureKey, index: 0, conflict: true},
		{name: "disclosure key is the policy's log key renamed", keys: Keys{Policy: policy, Disclosure: []string{renamed(t, k.log)}}, field: FieldDisclosureKey, index: 0, conflict: true},
		{name: "witness key as disclosure key", keys: Keys{Logs: []string{k.log}, Disclosure: []string{k.w2}}, field: FieldDisclosureKey, index: 0, conflict: true},
		// Issue 29 item 2: one key given twice is one key, not an ambiguity
		// that fails the package; another key under its name and ID is the
		// caller's mistake.
		{name: "disclosure key given twice", keys: Keys{Policy: policy, Disclosure: []string{k.disc, k.disc}}, discKeys: 1},
		// (The key ID is a hash of the name and key, so the second is refused
		// as malformed before it could be held beside the first.)
		{name: "two disclosure keys, one name and key ID", keys: Keys{Policy: policy, Disclosure: []string{k.disc, sameName(k.log2, k.disc)}}, field: FieldDisclosureKey, index: 1, wantInText: "key ID"},
		{name: "disclosure key is a witness's key as a note key", keys: Keys{Policy: policy, Disclosure: []string{asNoteKey(t, k.w1)}}, field: FieldDisclosureKey, index: 0, conflict: true, wantInText: "witness"},
		{name: "malformed disclosure key", keys: Keys{Logs: []string{k.log}, Disclosure: []string{"x+y+z"}}, field: FieldDisclosureKey, index: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := tt.keys.Trust()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Trust: %v", err)
				}
				if len(tr.Options.Logs)+len(tr.Options.Policy.Logs()) == 0 || tr.Options.Policy == nil || tr.PolicyText == "" {
					t.Fatalf("Trust = %+v: want log keys and a policy", tr)
				}
				want := len(tt.keys.Disclosure)
				if tt.discKeys != 0 {
					want = tt.discKeys
				}
				if len(tr.Options.Disclosure) != want {
					t.Fatalf("%d disclosure keys, want %d", len(tr.Options.Disclosure), want)
				}
				return
			}
			var ke *KeyError
			if !errors.As(err, &ke) || !errors.Is(err, ErrKeys) {
				t.Fatalf("Trust error = %v, want a *KeyError matching ErrKeys", err)
			}
			if ke.Field != tt.field || ke.Index != tt.index {
				t.Fatalf("KeyError field %q index %d, want %q %d (%v)", ke.Field, ke.Index, tt.field, tt.index, err)
			}
			if !strings.HasPrefix(err.Error(), "--"+tt.field) || !strings.Contains(err.Error(), tt.wantInText) {
				t.Fatalf("message %q: want it to start with --%s and hold %q", err, tt.field, tt.wantInText)
			}
			if got := errors.Is(err, disclosure.ErrKeyConflict); got != tt.conflict {
				t.Fatalf("errors.Is(ErrKeyConflict) = %v, want %v (%v)", got, tt.conflict, err)
			}
		})
	}
}

// asNoteKey is a cosignature/v1 verifier key's public key as an Ed25519
// note key (type 0x01), under another name: the same key material.
func asNoteKey(t testing.TB, cosigner string) string {
	t.Helper()
	parts := strings.SplitN(cosigner, "+", 3)
	key, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	key[0] = 0x01
	return renamed(t, parts[0]+"+"+parts[1]+"+"+base64.StdEncoding.EncodeToString(key))
}

// renamed is vkey under another name, with the key ID that name gives it
// (note's key hash: SHA-256 of name, newline, key).
func renamed(t testing.TB, vkey string) string {
	t.Helper()
	parts := strings.SplitN(vkey, "+", 3)
	key, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	const name = "other.example"
	h := sha256.Sum256(append([]byte(name+"\n"), key...))
	out := fmt.Sprintf("%s+%08x+%s", name, binary.BigEndian.Uint32(h[:4]), parts[2])
	if _, err := checkpoint.NewVerifier(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameName gives key a the name and key ID of key b: two different keys
// claiming one identity.
func sameName(a, b string) string {
	pa, pb := strings.SplitN(a, "+", 3), strings.SplitN(b, "+", 3)
	return pb[0] + "+" + pb[1] + "+" + pa[2]
}

func FuzzKeysTrust(f *testing.F) {
	k := newTestKeys(f)
	f.Add(k.log, k.w1, "", k.disc, 0)
	f.Add(k.log, "", "log "+k.log+"\nquorum none\n", k.disc, 0)
	f.Add("a+b+c", "x", "witness w "+k.w1+"\nquorum w\n", k.log, 3)
	f.Fuzz(func(t *testing.T, log, witness, policy, disc string, quorum int) {
		keys := Keys{Quorum: quorum % 8}
		if log != "" {
			keys.Logs = []string{log}
		}
		if witness != "" {
			keys.Witnesses = []string{witness}
		}
		if policy != "" {
			keys.Policy = []byte(policy)
		}
		if disc != "" {
			keys.Disclosure = []string{disc}
		}
		tr, err := keys.Trust()
		if err != nil {
			var ke *KeyError
			if !errors.As(err, &ke) || !errors.Is(err, ErrKeys) {
				t.Fatalf("error %v is not a *KeyError", err)
			}
			return
		}
		if len(tr.Options.Logs) == 0 && (tr.Options.Policy == nil || len(tr.Options.Policy.Logs()) == 0) {
			t.Fatal("Trust accepted keys without a log key")
		}
	})
}
