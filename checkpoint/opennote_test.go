package checkpoint

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// OpenNote verifies a signed note that is not a checkpoint by the rules of
// Open (spec/checkpoint.md 2.2): every line of a known key, a second one
// too, and lines of unknown keys ignored.
func TestOpenNote_EveryLineOfAKnownKey(t *testing.T) {
	skey, vkey, err := GenerateLogKey(rand.Reader, "example.com/log/disclosure")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: "any text\nof two lines\n"}, s)
	if err != nil {
		t.Fatal(err)
	}
	known := note.VerifierList(v)
	text, sigs, err := OpenNote(msg, known)
	if err != nil || string(text) != "any text\nof two lines\n" || len(sigs) != 1 || sigs[0].Name != v.Name() {
		t.Fatalf("OpenNote = %q, %v, %v", text, sigs, err)
	}
	// The same line twice is one line; a second, different line by the key
	// that fails rejects the note although the first verified.
	line := msg[bytes.LastIndex(msg, []byte("\n\n"))+2:]
	if _, sigs, err := OpenNote(append(bytes.Clone(msg), line...), known); err != nil || len(sigs) != 1 {
		t.Fatalf("a repeated line: %v, %d signatures", err, len(sigs))
	}
	b64 := strings.TrimSpace(string(line[strings.LastIndexByte(string(line[:len(line)-1]), ' ')+1:]))
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	bad := strings.Replace(string(line), b64, base64.StdEncoding.EncodeToString(raw), 1)
	if _, _, err := OpenNote(append(bytes.Clone(msg), bad...), known); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("a second failing line: %v, want ErrInvalidSignature", err)
	}
	// Only unknown keys: unverified.
	if _, _, err := OpenNote(msg, note.VerifierList()); !errors.Is(err, ErrUnverified) {
		t.Fatalf("no known key: %v, want ErrUnverified", err)
	}
}
