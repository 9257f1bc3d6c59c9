package console

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store/storetest"
)

// TestConsole_CookieDoesNotCarryToken: signing in with a reader or a
// writer token sets a cookie that is a fresh 256-bit random id, neither
// the token nor holding any part of it, and a cookie that holds a token
// (as the console's cookie once did) opens no session.
func TestConsole_CookieDoesNotCarryToken(t *testing.T) {
	f := newFixture(t)
	for _, tok := range []string{f.reader, f.writer} {
		_, secret, _ := strings.Cut(tok[3:], "_") // rs_<id>_<secret>
		id := tok[3 : 3+16]
		seen := map[string]bool{}
		for range 2 {
			resp, body := f.signIn(tok)
			ck := sessionCookie(resp)
			if resp.StatusCode != http.StatusSeeOther || ck == nil {
				t.Fatalf("sign in: %d, no cookie\n%s", resp.StatusCode, body)
			}
			for _, part := range []string{tok, secret, id} {
				if strings.Contains(ck.Value, part) {
					t.Errorf("the session cookie %q holds %q of the token", ck.Value, part)
				}
			}
			if raw, err := base64.RawURLEncoding.DecodeString(ck.Value); err != nil || len(raw) != 32 {
				t.Errorf("the session cookie %q is not a 256-bit id (%d bytes, %v)", ck.Value, len(raw), err)
			}
			if seen[ck.Value] {
				t.Errorf("two sign-ins got the same session id")
			}
			seen[ck.Value] = true
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Domain != "" {
				t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, no Domain", ck)
			}
			if resp, _ := f.getCookie("/console/log", ck.Value); resp.StatusCode != http.StatusOK {
				t.Errorf("the session does not open the Log page: %d", resp.StatusCode)
			}
		}
		if resp, body := f.getCookie("/console/log", tok); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `id="token"`) {
			t.Errorf("a cookie holding the token itself: %d, want the sign-in page with 401", resp.StatusCode)
		}
	}
}

// TestConsole_SignOutEndsSessionOnServer: after sign-out, the session's
// cookie replayed (as a copy taken before would be) is refused; another
// session of the same token goes on.
func TestConsole_SignOutEndsSessionOnServer(t *testing.T) {
	f := newFixture(t)
	resp, _ := f.signIn(f.reader)
	ck := sessionCookie(resp)
	other := f.session(f.reader)
	if resp, _ := f.getCookie("/console/log", ck.Value); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in: %d", resp.StatusCode)
	}
	req, err := http.NewRequest("POST", f.url+"/console/signout", nil)
	must(t, err)
	req.AddCookie(ck)
	resp, _ = do(t, req)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if c := sessionCookie(resp); c == nil || c.MaxAge >= 0 || c.Value != "" {
		t.Errorf("sign-out does not clear the cookie: %+v", c)
	}
	resp, body := f.getCookie("/console/log", ck.Value)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `id="token"`) || !strings.Contains(body, "Your session has ended") {
		t.Errorf("the signed-out session's cookie replayed: %d, want the sign-in page with 401\n%s", resp.StatusCode, body)
	}
	if resp, _ := f.getCookie("/console/log", other); resp.StatusCode != http.StatusOK {
		t.Errorf("signing out one session ended another of the same token: %d", resp.StatusCode)
	}
}

// TestConsole_SignInAgainEndsTheBrowsersSession: signing in from a browser
// that holds a session ends that session; the browser gets a new id, and
// the old one, replayed, is refused (no id outlives a sign-in, and repeated
// sign-ins from one browser hold one session).
func TestConsole_SignInAgainEndsTheBrowsersSession(t *testing.T) {
	f := newFixture(t)
	old := f.session(f.reader)
	for _, tok := range []string{f.reader, f.writer} {
		req, err := http.NewRequest("POST", f.url+"/console/signin", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		must(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: CookieName, Value: old})
		resp, _ := do(t, req)
		ck := sessionCookie(resp)
		if resp.StatusCode != http.StatusSeeOther || ck == nil || ck.Value == old {
			t.Fatalf("signing in again: %d, cookie %+v: want a new session", resp.StatusCode, ck)
		}
		if resp, _ := f.getCookie("/console/log", old); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the session held before signing in again, replayed: %d, want 401", resp.StatusCode)
		}
		if n := f.con.sessions.len(); n != 1 {
			t.Errorf("after signing in again from one browser, %d sessions are held, want 1", n)
		}
		old = ck.Value
	}
}

// TestConsole_SessionExpires: a session ends Idle after its last request,
// and MaxAge after sign-in however busy, each with a message saying so;
// an ended session is gone from memory.
func TestConsole_SessionExpires(t *testing.T) {
	f := newFixture(t)
	clk := storetest.NewFakeClock()
	g := f.with(func(c *Config) {
		c.Now = clk.Now
		c.Sessions = SessionLimits{MaxAge: 12 * time.Hour, Idle: 30 * time.Minute}
	})
	get := func(ck string) (int, string) {
		t.Helper()
		resp, body := g.getCookie("/console/log", ck)
		return resp.StatusCode, body
	}

	// Idle: each request moves the idle bound; 30 minutes without ends it.
	ck := g.session(f.reader)
	for range 3 {
		clk.Advance(29 * time.Minute)
		if code, _ := get(ck); code != http.StatusOK {
			t.Fatalf("a session used every 29 minutes ended: %d", code)
		}
	}
	clk.Advance(30 * time.Minute)
	if code, body := get(ck); code != http.StatusUnauthorized || !strings.Contains(body, "after 30m without use") {
		t.Errorf("a session idle for 30 minutes: %d, want 401 saying it ended\n%s", code, body)
	}
	if n := g.con.sessions.len(); n != 0 {
		t.Errorf("the idle session is still held (%d sessions)", n)
	}

	// Absolute: used every 20 minutes, it still ends 12 hours after sign-in.
	delete(g.sessions, f.reader)
	ck = g.session(f.reader)
	for i := 1; ; i++ {
		clk.Advance(20 * time.Minute)
		code, body := get(ck)
		if time.Duration(i)*20*time.Minute < 12*time.Hour {
			if code != http.StatusOK {
				t.Fatalf("after %d minutes, in use: %d", i*20, code)
			}
			continue
		}
		if code != http.StatusUnauthorized || !strings.Contains(body, "ended 12h after sign-in") {
			t.Errorf("12 hours after sign-in: %d, want 401 saying the session ended\n%s", code, body)
		}
		break
	}
	if n := g.con.sessions.len(); n != 0 {
		t.Errorf("the expired session is still held (%d sessions)", n)
	}
}

// TestConsole_SecureHostCookieBehindTLS: behind a TLS proxy (the operator
// says so) or over TLS itself, the session cookie is __Host-, Secure,
// Path=/ and without Domain, so no other host, nor a plain-HTTP port of
// this one, can set or read it; the same value under the plain name is no
// session. Over plain HTTP the cookie keeps the plain name, since browsers
// refuse __Host- without Secure.
func TestConsole_SecureHostCookieBehindTLS(t *testing.T) {
	f := newFixture(t)
	behind := f.with(func(c *Config) { c.SecureCookie = true })
	resp, _ := behind.signIn(f.reader)
	set := resp.Header.Get("Set-Cookie")
	if !strings.HasPrefix(set, SecureCookieName+"=") || !strings.Contains(set, "; Secure") || !strings.Contains(set, "; Path=/") || strings.Contains(strings.ToLower(set), "domain=") {
		t.Fatalf("behind TLS, sign-in sets %q: want %s, Secure, Path=/, no Domain", set, SecureCookieName)
	}
	ck := sessionCookie(resp)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("the __Host- cookie is not HttpOnly, SameSite=Strict: %q", set)
	}
	get := func(name string) (int, string) {
		req, err := http.NewRequest("GET", behind.url+"/console/log", nil)
		must(t, err)
		req.AddCookie(&http.Cookie{Name: name, Value: ck.Value})
		resp, body := do(t, req)
		return resp.StatusCode, body
	}
	if code, _ := get(SecureCookieName); code != http.StatusOK {
		t.Errorf("the __Host- session: %d", code)
	}
	if code, body := get(CookieName); code != http.StatusUnauthorized || !strings.Contains(body, `id="token"`) {
		t.Errorf("behind TLS, the session id under the plain name (settable from any port of the host): %d, want the sign-in page", code)
	}
	req, err := http.NewRequest("POST", behind.url+"/console/signout", nil)
	must(t, err)
	req.AddCookie(&http.Cookie{Name: SecureCookieName, Value: ck.Value})
	resp, _ = do(t, req)
	if set := resp.Header.Get("Set-Cookie"); !strings.HasPrefix(set, SecureCookieName+"=;") || !strings.Contains(set, "; Secure") {
		t.Errorf("sign-out behind TLS sets %q: the browser keeps a __Host- cookie unless the clearing one is Secure too", set)
	}

	// A request over TLS itself gets the same cookie without the flag.
	req = httptest.NewRequest("POST", "https://journal.example/console/signin", strings.NewReader(url.Values{"token": {f.reader}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	f.con.ServeHTTP(rec, req)
	if c := sessionCookie(rec.Result()); c == nil || c.Name != SecureCookieName || !c.Secure {
		t.Errorf("over TLS, sign-in sets %q", rec.Header().Get("Set-Cookie"))
	}

	// Plain HTTP without the flag: the plain name, not Secure.
	resp, _ = f.signIn(f.reader)
	if c := sessionCookie(resp); c == nil || c.Name != CookieName || c.Secure {
		t.Errorf("over plain HTTP, sign-in sets %q: want %s without Secure", resp.Header.Get("Set-Cookie"), CookieName)
	}
}

// TestConsole_SessionsAreBounded: one token signing in again and again
// holds at most PerToken sessions, and all tokens together at most Total;
// over a bound the least recently used session ends (its cookie is then
// refused), and meeting the total bound is logged once, not per sign-in.
func TestConsole_SessionsAreBounded(t *testing.T) {
	f := newFixture(t)
	clk := storetest.NewFakeClock()
	logPath := filepath.Join(t.TempDir(), "log") // a file: the server writes it while the test reads
	logs, err := os.Create(logPath)
	must(t, err)
	defer logs.Close()
	g := f.with(func(c *Config) {
		c.Now = clk.Now
		c.Sessions = SessionLimits{PerToken: 3, Total: 5}
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	signIn := func(tok string) string {
		t.Helper()
		clk.Advance(time.Second) // least recently used is then one session
		resp, body := g.signIn(tok)
		ck := sessionCookie(resp)
		if resp.StatusCode != http.StatusSeeOther || ck == nil {
			t.Fatalf("sign in: %d\n%s", resp.StatusCode, body)
		}
		return ck.Value
	}
	live := func(ck string) bool {
		t.Helper()
		clk.Advance(time.Second)
		resp, _ := g.getCookie("/console/log", ck)
		return resp.StatusCode == http.StatusOK
	}

	// Per token: a fourth sign-in ends the token's least recently used.
	r1, r2, r3 := signIn(f.reader), signIn(f.reader), signIn(f.reader)
	if !live(r1) { // r1 used: r2 is now the least recently used
		t.Fatalf("the first session is not live")
	}
	r4 := signIn(f.reader)
	if live(r2) || !live(r1) || !live(r3) || !live(r4) {
		t.Errorf("the fourth session of one token did not end exactly the least recently used")
	}
	for range 100 {
		signIn(f.reader)
	}
	if n := g.con.sessions.len(); n != 3 {
		t.Errorf("103 sign-ins with one token hold %d sessions, want 3", n)
	}

	// In all: the sixth session ends the least recently used of any token.
	w1 := signIn(f.writer)
	w2 := signIn(f.writer)
	if n := g.con.sessions.len(); n != 5 {
		t.Fatalf("%d sessions, want 5", n)
	}
	a1 := signIn(f.acmeReader)
	if n := g.con.sessions.len(); n != 5 {
		t.Errorf("past the total bound: %d sessions, want 5", n)
	}
	if !live(w1) || !live(w2) || !live(a1) {
		t.Errorf("the newest sessions were ended instead of the least recently used")
	}
	for range 20 {
		signIn(f.acmeReader)
	}
	if n := g.con.sessions.len(); n != 5 {
		t.Errorf("%d sessions, want 5", n)
	}
	logged, err := os.ReadFile(logPath)
	must(t, err)
	if n := strings.Count(string(logged), "session bound is met"); n != 1 {
		t.Errorf("meeting the session bound was logged %d times, want once:\n%s", n, logged)
	}
}

// TestConsole_RevokedTokenEndsAllItsSessions: once a request finds its
// token revoked, every session opened with that token is gone from the
// server, not only the one that asked.
func TestConsole_RevokedTokenEndsAllItsSessions(t *testing.T) {
	f := newFixture(t)
	a1 := f.session(f.acmeReader)
	resp, _ := f.signIn(f.acmeReader)
	a2 := sessionCookie(resp).Value
	r := f.session(f.reader)
	if n := f.con.sessions.len(); n != 3 {
		t.Fatalf("%d sessions, want 3", n)
	}
	if ok, err := f.st.RevokeToken(context.Background(), f.acmeReaderID); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	if resp, body := f.getCookie("/console/log", a1); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "was revoked") {
		t.Fatalf("a session of a revoked token: %d\n%s", resp.StatusCode, body)
	}
	if n := f.con.sessions.len(); n != 1 {
		t.Errorf("after the revocation was seen, %d sessions are held, want 1 (the other token's)", n)
	}
	if resp, _ := f.getCookie("/console/log", a2); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the revoked token's second session: %d", resp.StatusCode)
	}
	if resp, _ := f.getCookie("/console/log", r); resp.StatusCode != http.StatusOK {
		t.Errorf("another token's session: %d", resp.StatusCode)
	}
}

// TestDurText: a session bound reads without its zero units.
func TestDurText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Minute: "30m", 10 * time.Minute: "10m", 12 * time.Hour: "12h",
		90 * time.Minute: "1h30m", 45 * time.Second: "45s", time.Hour + 5*time.Second: "1h0m5s",
	} {
		if got := durText(d); got != want {
			t.Errorf("durText(%s) = %q, want %q", d, got, want)
		}
	}
}
