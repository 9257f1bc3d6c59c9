package main

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/console"
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

// TestServe_BehindTLSConsoleCookieIsSecureHost: 'serve --behind-tls' signs
// the console in with the Secure __Host- cookie, which holds a session id
// and not the token; without the flag the cookie keeps the plain name,
// which browsers accept over plain HTTP.
func TestServe_BehindTLSConsoleCookieIsSecureHost(t *testing.T) {
	for _, c := range []struct {
		args   []string
		name   string
		secure bool
	}{
		{[]string{"--behind-tls"}, console.SecureCookieName, true},
		{nil, console.CookieName, false},
	} {
		db := filepath.Join(t.TempDir(), "j.db")
		sv := startServe(t, db, c.args...)
		tok := createToken(t, db, "default", "reader")
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.PostForm(sv.base+"/console/signin", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cks := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || len(cks) != 1 {
			t.Fatalf("serve %v: sign-in %d, cookies %v", c.args, resp.StatusCode, cks)
		}
		ck := cks[0]
		if ck.Name != c.name || ck.Secure != c.secure || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly {
			t.Errorf("serve %v: session cookie %q, want %s with Secure %v, Path=/, no Domain, HttpOnly", c.args, resp.Header.Get("Set-Cookie"), c.name, c.secure)
		}
		if strings.Contains(ck.Value, tok[3:]) || strings.Contains(tok, ck.Value) {
			t.Errorf("serve %v: the session cookie carries the token", c.args)
		}
		sv.stop()
	}
}
