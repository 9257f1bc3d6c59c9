package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestParseAddCheckpointRequest(t *testing.T) {
	h1, h2 := sha256.Sum256([]byte("1")), sha256.Sum256([]byte("2"))
	note := "log.example\n1\n" + base64.StdEncoding.EncodeToString(h1[:]) + "\n\n\u2014 log.example AAAAAQ==\n"
	body := "old 18446744073709551615\n" + base64.StdEncoding.EncodeToString(h1[:]) + "\n" + base64.StdEncoding.EncodeToString(h2[:]) + "\n\n" + note
	r, err := ParseAddCheckpointRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.Old != 1<<64-1 || len(r.Proof) != 2 || r.Proof[0] != h1 || r.Proof[1] != h2 || string(r.Note) != note {
		t.Fatalf("parsed %+v", r)
	}
	if got := r.Marshal(); string(got) != body {
		t.Fatalf("Marshal = %q, want %q", got, body)
	}

	r, err = ParseAddCheckpointRequest([]byte("old 0\n\nx"))
	if err != nil || r.Old != 0 || len(r.Proof) != 0 || string(r.Note) != "x" {
		t.Fatalf("minimal request: %+v %v", r, err)
	}
	// Exactly 63 proof lines are allowed.
	r, err = ParseAddCheckpointRequest([]byte("old 1\n" + strings.Repeat(base64.StdEncoding.EncodeToString(h1[:])+"\n", 63) + "\nx"))
	if err != nil || len(r.Proof) != 63 {
		t.Fatalf("63 proof lines: %v", err)
	}
}

func TestParseAddCheckpointRequestErrors(t *testing.T) {
	h := base64.StdEncoding.EncodeToString(make([]byte, 32))
	cases := []struct {
		body string
		line int
	}{
		{"", 1},
		{"old 0", 1},
		{"old 0\n", 2},
		{"old 0\n\n", 3},
		{"old 0\n" + h + "\n\n", 4},
		{"old 00\n\nx", 1},
		{"old 1 \n\nx", 1},
		{" old 1\n\nx", 1},
		{"old 0x1\n\nx", 1},
		{"old 0\n" + h + "\nx", 3},
		{"old 0\n" + h + " \n\nx", 2},
		{"old 0\n" + h[:43] + "\n\nx", 2},
		{"old 0\n" + h[:42] + "==\n\nx", 2},
		{"old 0\n" + h[:42] + "B=\n\nx", 2}, // non-zero trailing bits
		{"old 0\n" + strings.Repeat(h+"\n", 64) + "\nx", 65},
	}
	for _, c := range cases {
		_, err := ParseAddCheckpointRequest([]byte(c.body))
		var se *RequestSyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrMalformedRequest) {
			t.Errorf("%q: %v, want a *RequestSyntaxError", c.body, err)
			continue
		}
		if se.Line != c.line {
			t.Errorf("%q: line %d, want %d (%v)", c.body, se.Line, c.line, err)
		}
	}
	big := append([]byte("old 0\n\n"), bytes.Repeat([]byte("x"), MaxRequestSize)...)
	if _, err := ParseAddCheckpointRequest(big); !errors.Is(err, errBodyTooLarge) || StatusCode(err) != 413 {
		t.Errorf("oversized: %v", err)
	}
}

// FuzzParseAddCheckpointRequest checks that the parser never panics, that
// what it accepts re-encodes to the same bytes (one spelling per request),
// and that the parsed request does not alias its input.
func FuzzParseAddCheckpointRequest(f *testing.F) {
	h := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, s := range []string{
		"old 0\n\nlog.example\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n\u2014 log.example AAAAAQ==\n",
		"old 5\n" + h + "\n" + h + "\n\nx",
		"old 18446744073709551615\n\nx",
		"old 18446744073709551616\n\nx",
		"old 01\n\nx",
		"old 0\n" + strings.Repeat(h+"\n", 63) + "\nx",
		"old 0\n" + strings.Repeat(h+"\n", 64) + "\nx",
		"old 0\r\n\r\nx",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		body := bytes.Clone(input) // the fuzzer's input must not be modified
		r, err := ParseAddCheckpointRequest(body)
		if err != nil {
			if !errors.Is(err, ErrMalformedRequest) {
				t.Fatalf("error %v does not wrap ErrMalformedRequest", err)
			}
			if c := StatusCode(err); c != 400 && c != 413 {
				t.Fatalf("status %d for a parse error", c)
			}
			return
		}
		if len(r.Proof) > MaxProofHashes || len(r.Note) == 0 {
			t.Fatalf("accepted %d proof hashes and a %d-byte note", len(r.Proof), len(r.Note))
		}
		if got := r.Marshal(); !bytes.Equal(got, body) {
			t.Fatalf("re-encoding differs:\n%q\n%q", got, body)
		}
		for i := range body {
			body[i] ^= 0xff
		}
		if got := r.Marshal(); bytes.Equal(got, body) {
			t.Fatal("parsed request aliases the body")
		}
	})
}
