package main

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
)

// withSecondBadSignature returns the package at path with a second
// signature line by the disclosure key added to its statement, the
// signature's last byte changed: a line of a known key that fails, after
// one that verifies.
func withSecondBadSignature(t *testing.T, pkg string) string {
	t.Helper()
	b, err := os.ReadFile(pkg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	sig := "\u2014 " + origin + disclosure.DisclosureKeySuffix + " "
	i := strings.LastIndex(s, sig)
	if i < 0 {
		t.Fatal("the package's statement has no signature by the disclosure key")
	}
	rest := s[i+len(sig):]
	b64 := rest[:strings.Index(rest, `\n`)]
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	from := sig + b64 + `\n"}`
	if !strings.HasSuffix(s, from+"\n") {
		t.Fatal("the statement's signature is not the trailer's end")
	}
	return strings.TrimSuffix(s, from+"\n") + sig + b64 + `\n` + sig + base64.StdEncoding.EncodeToString(raw) + `\n"}` + "\n"
}

// Issue 29 item 1: a statement whose first line by the disclosure key
// verifies and whose second, different line by the same key fails is
// NOT SOUND: every line of a known key is checked (spec/checkpoint.md 2.2,
// spec/disclosure.md 4.1 item 9), not only its first, as x/mod's note.Open
// does.
func TestVerify_SecondBadSignatureFromDisclosureKeyIsNotSound(t *testing.T) {
	e := newEnv(t)
	a := e.addRun(false)
	good := e.pkg("good.jsonl", a)
	if code, out, errOut := cli(t, e.args("verify", good)...); code != exitSound {
		t.Fatalf("the package before the change: exit %d\n%s%s", code, out, errOut)
	}
	bad := e.write("bad.jsonl", withSecondBadSignature(t, good))
	code, out, errOut := cli(t, e.args("verify", bad)...)
	if code != exitNotSound || !strings.Contains(out, "NOT SOUND") || !strings.Contains(out, disclosure.CheckStatement) {
		t.Fatalf("exit %d, want %d (not sound, check statement)\n%s%s", code, exitNotSound, out, errOut)
	}
}

// Issue 29 item 2: the same disclosure key given twice is one key, as a
// log key given twice is (spec/disclosure.md section 4); two different
// keys under one name and key ID are a usage error, never a finding about
// the package, whose bytes are unchanged.
func TestVerify_DisclosureKeyGivenTwiceIsOneKey(t *testing.T) {
	e := newEnv(t)
	good := e.pkg("good.jsonl", e.addRun(false))
	disc := "@" + filepath.Join(e.dir, "disclosure.vkey")
	vk, err := os.ReadFile(filepath.Join(e.dir, "disclosure.vkey"))
	if err != nil {
		t.Fatal(err)
	}
	// Another public key under the disclosure key's name and key ID.
	clash := string(vk[:len(vk)-8]) + "AAAAAAAA"
	for name, tc := range map[string]struct {
		args []string
		code int
	}{
		"twice, same spelling":      {append(e.args("verify", good), "--disclosure-key", disc), exitSound},
		"twice, file and inline":    {append(e.args("verify", good), "--disclosure-key", string(vk)), exitSound},
		"another key, same name+id": {append(e.args("verify", good), "--disclosure-key", clash), exitUsage},
	} {
		t.Run(name, func(t *testing.T) {
			if code, out, errOut := cli(t, tc.args...); code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
		})
	}
}

// A statement counts only under the key named <checkpoint origin>/disclosure
// (spec/disclosure.md 2.7 item 7): a package signed by a key named for
// another origin, that key given, is not sound (unverifiable: no key of the
// package's journal signed it).
func TestVerify_DisclosureKeyNamedForAnotherOriginIsRefused(t *testing.T) {
	e := newEnv(t)
	sk, vk, err := checkpoint.GenerateLogKey(rand.Reader, "other.example/log"+disclosure.DisclosureKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	if e.disc, err = checkpoint.NewSigner(sk); err != nil {
		t.Fatal(err)
	}
	e.write("disclosure.vkey", vk)
	pkg := e.pkg("other.jsonl", e.addRun(false))
	code, out, errOut := cli(t, e.args("verify", pkg)...)
	if code != exitUnverifiable || !strings.Contains(out, origin+disclosure.DisclosureKeySuffix) {
		t.Fatalf("exit %d, want %d naming the key %s\n%s%s", code, exitUnverifiable, origin+disclosure.DisclosureKeySuffix, out, errOut)
	}
}
