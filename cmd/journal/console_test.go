package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServe_RootIsConsoleSignInWithFirstTokenCommand: / answers the
// console's sign-in page instead of 404, and on a journal with no token
// both serve's stderr and that page give the exact command that creates
// one for this journal (its --db); once a token exists, the page does not.
func TestServe_RootIsConsoleSignInWithFirstTokenCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "j.db")
	sv := startServe(t, db)
	want := "journal token create --role reader --name console --db " + db
	if !strings.Contains(sv.stderr.String(), want) {
		t.Errorf("serve's stderr lacks %q:\n%s", want, sv.stderr.String())
	}
	code, body := sv.do("GET", "/", "", "")
	if code != 200 || !strings.Contains(body, `id="token"`) || !strings.Contains(body, want) {
		t.Fatalf("GET /: %d, want the sign-in page with %q:\n%s", code, want, body)
	}
	tok := createToken(t, db, "default", "reader")
	code, body = sv.do("GET", "/", "", "")
	if code != 200 || strings.Contains(body, `id="firststart"`) {
		t.Errorf("GET / with a token in the journal: %d, still shows the first-start hint", code)
	}
	if code, body = sv.do("GET", "/v1/status", tok, ""); code != 200 || !strings.Contains(body, `"origin"`) {
		t.Errorf("GET /v1/status: %d %s", code, body)
	}
	if code, _ = sv.do("GET", "/v1/nowhere", tok, ""); code != 404 {
		t.Errorf("an unknown API path: %d, want 404", code)
	}
}
