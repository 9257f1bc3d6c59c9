package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
)

// consolePages are every page of the console, for tenant default.
func (f *fixture) consolePages() []string {
	return []string{
		"/console/log", "/console/activity", "/console/backlogs",
		"/console/runs/" + f.sealedRun.String(), "/console/runs/" + f.cancelled.String(),
		"/console/disclosures", "/console/studies", "/console/studies/" + string(f.study),
	}
}

var inlineScript = regexp.MustCompile(`<script(?:\s[^>]*)?>`)

// TestConsole_HeadersForbidFramingAndInlineScript: every console answer,
// signed in or not and errors included, carries the CSP (scripts from this
// origin only, frame-ancestors 'none'), X-Frame-Options DENY and no-store;
// and no page holds an inline script the CSP would have to allow.
func TestConsole_HeadersForbidFramingAndInlineScript(t *testing.T) {
	f := newFixture(t)
	paths := append(f.consolePages(), "/", "/console/signin", "/console/nowhere", "/console/runs/not-a-run")
	for _, p := range paths {
		for _, ck := range []string{"", f.session(f.reader), "rs_0000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
			resp, body := f.getCookie(p, ck)
			h := resp.Header
			csp := h.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("GET %s: CSP %q lacks %q", p, csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("GET %s: CSP %q allows inline script", p, csp)
			}
			if h.Get("X-Frame-Options") != "DENY" {
				t.Errorf("GET %s: X-Frame-Options %q", p, h.Get("X-Frame-Options"))
			}
			if h.Get("Cache-Control") != "no-store" {
				t.Errorf("GET %s: Cache-Control %q, want no-store", p, h.Get("Cache-Control"))
			}
			for _, tag := range inlineScript.FindAllString(body, -1) {
				if !strings.Contains(tag, `src="/console/static/`) {
					t.Errorf("GET %s: inline or foreign script %s", p, tag)
				}
			}
		}
	}
}

// TestConsole_TokenSecretNeverRendered: no page shows any token's secret,
// though the Disclosures page lists the tokens.
func TestConsole_TokenSecretNeverRendered(t *testing.T) {
	f := newFixture(t)
	for _, p := range append(f.consolePages(), "/console/signin") {
		resp, body := f.get(p, f.reader)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", p, resp.StatusCode, body)
		}
		for _, secret := range []string{f.reader, f.writer, f.acmeReader} {
			_, tail, _ := strings.Cut(secret[3:], "_") // the secret part, after the id
			if strings.Contains(body, tail) {
				t.Errorf("GET %s shows a token's secret", p)
			}
		}
	}
	_, body := f.get("/console/disclosures", f.reader)
	for _, want := range []string{"alice-console", "ci-writer", "reader", "writer"} {
		if !strings.Contains(body, want) {
			t.Errorf("Disclosures page lacks token %q", want)
		}
	}
	if strings.Contains(body, "acme-console") {
		t.Errorf("Disclosures page of tenant default lists a token of tenant acme")
	}
}

// TestSignIn_RevokedTokenLandsOnSignInWithMessage: revoking a signed-in
// token ends its session at the next request, with a message naming it
// revoked, and the cookie is cleared.
func TestSignIn_RevokedTokenLandsOnSignInWithMessage(t *testing.T) {
	f := newFixture(t)
	resp, body := f.signIn(f.acmeReader)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/log" {
		t.Fatalf("sign-in: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Expires.IsZero() == false || ck.MaxAge != 0 {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, no expiry", ck)
	}
	if resp, _ := f.getCookie("/console/log", ck.Value); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in: %d", resp.StatusCode)
	}
	if ok, err := f.st.RevokeToken(context.Background(), f.acmeReaderID); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	resp, body = f.getCookie("/console/log", ck.Value)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `id="token"`) {
		t.Fatalf("revoked token: %d, want the sign-in page with 401\n%s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "Token "+f.acmeReaderID+" was revoked at") {
		t.Errorf("revoked token: the page does not say it was revoked:\n%s", body)
	}
	cleared := false
	for _, c := range resp.Cookies() {
		cleared = cleared || (c.Name == CookieName && c.MaxAge < 0)
	}
	if !cleared {
		t.Errorf("revoked token: the session cookie is not cleared")
	}
	if resp, body := f.signIn(f.acmeReader); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "was revoked") {
		t.Errorf("signing in with a revoked token: %d\n%s", resp.StatusCode, body)
	}
}

// TestSignIn_WrongTokenGetsClearMessage: garbage, an unknown token and a
// known id with a wrong secret all get the sign-in page and one message,
// never a stack trace, and "revoked" is never said of a wrong secret. Put
// in the cookie, they are no session: the sign-in page says it ended.
func TestSignIn_WrongTokenGetsClearMessage(t *testing.T) {
	f := newFixture(t)
	id, _ := server.TokenID(f.reader)
	for _, tok := range []string{
		"hello", "rs_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"rs_" + id + "_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", strings.Repeat("x", 3000),
	} {
		resp, body := f.signIn(tok)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not a valid token") {
			t.Errorf("sign in with %.20q: %d\n%s", tok, resp.StatusCode, body)
		}
		if strings.Contains(body, "goroutine") || strings.Contains(body, ".go:") {
			t.Errorf("sign in with %.20q shows a stack trace", tok)
		}
		resp, body = f.getCookie("/console/log", tok)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Your session has ended") {
			t.Errorf("cookie %.20q: %d\n%s", tok, resp.StatusCode, body)
		}
	}
	if resp, body := f.signIn(strings.Repeat("y", maxSignInBody+1)); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "too large") {
		t.Errorf("oversized sign-in form: %d\n%s", resp.StatusCode, body)
	}
}

// TestSignIn_CrossSiteFormRefused: a sign-in form posted from another site
// (login CSRF: the victim's browser signed in as the attacker) is refused.
func TestSignIn_CrossSiteFormRefused(t *testing.T) {
	f := newFixture(t)
	for _, h := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "https://evil.example"}} {
		resp, _ := f.signIn(f.reader, h...)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("sign-in with %s: %s: %d, want 403", h[0], h[1], resp.StatusCode)
		}
		for _, c := range resp.Cookies() {
			if c.Name == CookieName && c.Value != "" {
				t.Errorf("cross-site sign-in set a session cookie")
			}
		}
		req, err := http.NewRequest("POST", f.url+"/console/signout", nil)
		must(t, err)
		req.Header.Set(h[0], h[1])
		if resp, _ := do(t, req); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("sign-out with %s: %s: %d, want 403 and no cookie", h[0], h[1], resp.StatusCode)
		}
	}
}

// TestConsole_OtherTenantSeesNothing: a session of tenant acme sees its own
// log and nothing of tenant default: not its runs (404, as unknown), not
// its backlogs, disclosures, witnesses or studies.
func TestConsole_OtherTenantSeesNothing(t *testing.T) {
	f := newFixture(t)
	forbidden := []string{f.sealedRun.String(), f.quarantined.String(), f.cancelled.String(), f.abandoned.String(),
		f.waiting.String(), string(f.study), f.disclosure.ID, f.witnessName, "Regulator of Examples", "alice-console"}
	for _, p := range []string{"/console/log", "/console/activity", "/console/backlogs", "/console/disclosures", "/console/studies"} {
		resp, body := f.get(p, f.acmeReader)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s as acme: %d", p, resp.StatusCode)
		}
		for _, s := range forbidden {
			if strings.Contains(body, s) {
				t.Errorf("GET %s as acme shows %q of tenant default", p, s)
			}
		}
	}
	_, body := f.get("/console/log", f.acmeReader)
	if !strings.Contains(body, f.acme.Origin()) {
		t.Errorf("acme's Log page does not show its origin %s", f.acme.Origin())
	}
	for _, p := range []string{"/console/runs/" + f.sealedRun.String(), "/console/studies/" + string(f.study)} {
		if resp, body := f.get(p, f.acmeReader); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "ToolCalled") {
			t.Errorf("GET %s as acme: %d, want 404 and nothing of the run", p, resp.StatusCode)
		}
	}
	if resp, _ := f.get("/console/runs/"+f.acmeRun.String(), f.reader); resp.StatusCode != http.StatusNotFound {
		t.Errorf("default's session reads acme's run: %d", resp.StatusCode)
	}
}

// TestFirstStart_SignInSaysHowToCreateToken: with no token in the journal,
// the sign-in page at / shows the exact command to create one; with one,
// it does not.
func TestFirstStart_SignInSaysHowToCreateToken(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log", Logger: quiet})
	must(t, err)
	defer st.Close()
	key := journaltest.NewLog(t, st.Origin()).Verifier
	const cmd = "journal token create --role reader --name console --db /srv/j.db"
	tenants := []server.Tenant{{Store: st, LogKey: key}}
	con, err := New(Config{Tenants: tenants, Tokens: st, Logger: quiet, FirstToken: cmd, Heavy: apiServer(t, tenants, st)})
	must(t, err)
	get := func() string {
		rec := httptest.NewRecorder()
		con.Handler(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /: %d", rec.Code)
		}
		return rec.Body.String()
	}
	if body := get(); !strings.Contains(body, cmd) || !strings.Contains(body, `id="firststart"`) {
		t.Fatalf("first start: the sign-in page does not show %q:\n%s", cmd, body)
	}
	id, _, hash, err := server.NewToken()
	must(t, err)
	must(t, st.CreateToken(ctx, store.Token{ID: id, Tenant: "default", Role: store.RoleReader, Hash: hash}))
	if body := get(); strings.Contains(body, `id="firststart"`) {
		t.Errorf("the first-start hint is still shown once a token exists")
	}
}

// TestRecordViews_SealedAndErasedFieldsNeverShowPayload: a sealed field is
// shown as sealed, or as erased when the key ring says its scope (the
// record's run, having no case) was erased; clear fields as stored; the
// envelope is never shown as a value, and a key ring failure is the page's.
func TestRecordViews_SealedAndErasedFieldsNeverShowPayload(t *testing.T) {
	env := sealed.EnvelopePrefix + "AQIDBA"
	raw := []byte(`{"epoch":1,"kind":"ToolCalled","note":"` + env + `","query":"` + env + `","run":"01J9Z8Q4W5X6Y7Z8A9B0C1D2E3","seq":2,"v":1}`)
	if !canon.IsCanonical(raw) {
		t.Fatalf("test record is not canonical")
	}
	b, err := store.DecodeBody(raw)
	must(t, err)
	rec := store.Record{Body: b, Raw: raw}
	const scope = "default/run/01J9Z8Q4W5X6Y7Z8A9B0C1D2E3"
	for _, c := range []struct {
		erased bool
		want   string
	}{{false, fieldSealed}, {true, fieldErased}} {
		var asked []string
		views, err := recordViews([]store.Record{rec}, "default", func(s string) (bool, error) { asked = append(asked, s); return c.erased, nil })
		must(t, err)
		got := views[0]
		if len(got.Fields) != 2 {
			t.Fatalf("fields %+v", got.Fields)
		}
		for _, fv := range got.Fields {
			if fv.State != c.want || fv.Value != "" {
				t.Errorf("erased %v: field %s: state %s value %q, want %s and no value", c.erased, fv.Name, fv.State, fv.Value, c.want)
			}
		}
		if len(asked) == 0 || asked[0] != scope {
			t.Errorf("the key ring was asked about %q, want %s", asked, scope)
		}
	}
	none := func(string) (bool, error) { return false, nil }
	views, err := recordViews([]store.Record{{Body: store.Body{Kind: "X"}, Raw: []byte(`{"epoch":1,"kind":"X","query":"plain","run":"01J9Z8Q4W5X6Y7Z8A9B0C1D2E3","seq":1,"v":1}`)}}, "default", none)
	must(t, err)
	if clear := views[0]; len(clear.Fields) != 1 || clear.Fields[0].State != fieldClear || clear.Fields[0].Value != `"plain"` {
		t.Errorf("clear field: %+v", clear.Fields)
	}
	if views, err := recordViews([]store.Record{{Raw: []byte(`{"kind":`)}}, "default", none); err != nil || views[0].Bad == "" {
		t.Errorf("bytes that do not decode are not reported: %v", err)
	}
	if _, err := recordViews([]store.Record{rec}, "default", func(string) (bool, error) { return false, keyring.ErrUnknownScope }); !errors.Is(err, keyring.ErrUnknownScope) {
		t.Errorf("a key ring failure = %v, want it returned", err)
	}
}

// TestRunPage_BoundedByCountAndBytes: a Run page holds at most
// recordsPerPage records and stops before the record that would take it
// past recordsPageBytes, and links to where the next page starts.
func TestRunPage_BoundedByCountAndBytes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	many, big := store.NewRunID(), store.NewRunID()
	for _, c := range []struct {
		run   store.RunID
		n     int
		field string
	}{{many, 250, "x"}, {big, 3, strings.Repeat("y", 600<<10)}} {
		l, err := f.st.Acquire(ctx, c.run, "w", time.Hour)
		must(t, err)
		var batch []store.Append
		for range c.n {
			batch = append(batch, store.Append{Run: c.run, Kind: "Note", Fields: []byte(`{"text":"` + c.field + `"}`)})
		}
		_, err = f.st.Append(ctx, l.Epoch, batch)
		must(t, err)
	}
	for _, c := range []struct {
		run        store.RunID
		from       store.Seq
		n          int
		next, prev string
	}{
		{many, 1, recordsPerPage, "?from=101", ""},
		{many, 201, 50, "", "?from=101"},
		{big, 1, 1, "?from=2", ""},
		{big, 3, 1, "", "?from=1"},
	} {
		recs, next, err := readRecords(ctx, f.st, c.run, c.from)
		must(t, err)
		if len(recs) != c.n || recs[0].Seq != c.from {
			t.Errorf("run of %s from %d: %d records from %d, want %d", c.run, c.from, len(recs), recs[0].Seq, c.n)
		}
		_, body := f.get(fmt.Sprintf("/console/runs/%s?from=%d", c.run, c.from), f.reader)
		if got := strings.Count(body, `<td class="num">`); got != c.n {
			t.Errorf("page from %d shows %d records, want %d", c.from, got, c.n)
		}
		if (c.next != "") != (next != 0) || (c.next != "" && !strings.Contains(body, `href="`+c.next+`">later records`)) {
			t.Errorf("page from %d: next %d, want link %q", c.from, next, c.next)
		}
		if c.prev != "" && !strings.Contains(body, `href="`+c.prev+`">`) {
			t.Errorf("page from %d: no link to %q", c.from, c.prev)
		}
	}
	if resp, _ := f.get("/console/runs/"+many.String()+"?from=0", f.reader); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("from=0: %d, want 400", resp.StatusCode)
	}
}

// FuzzRecordViews: stored bytes of any shape, and any opened fields beside
// them, are shown without a panic, and a field shown as sealed or erased
// never carries a value.
func FuzzRecordViews(f *testing.F) {
	f.Add([]byte(`{"epoch":1,"kind":"X","note":"`+sealed.EnvelopePrefix+`AQ","run":"01J9Z8Q4W5X6Y7Z8A9B0C1D2E3","seq":1,"v":1}`), []byte(`{"note":{"$erased":"s"}}`))
	f.Add([]byte(`{"kind":`), []byte(`null`))
	f.Add([]byte(`{"epoch":1,"kind":"X","a":[1,{"b":"c"}],"run":"01J9Z8Q4W5X6Y7Z8A9B0C1D2E3","seq":1,"v":1}`), []byte(nil))
	f.Fuzz(func(t *testing.T, raw, fields []byte) {
		views, _ := recordViews([]store.Record{{Raw: raw, Body: store.Body{Fields: fields}}}, "default", func(scope string) (bool, error) { return len(scope)%2 == 0, nil })
		for _, v := range views {
			for _, fv := range v.Fields {
				if fv.State != fieldClear && fv.Value != "" {
					t.Fatalf("field %s is %s yet shows %q", fv.Name, fv.State, fv.Value)
				}
			}
		}
	})
}

// TestBacklogs_PagesThroughALongListing: a section longer than a page
// shows pageSize runs with a link to the next page, which shows the rest
// and links back; another section's page is kept in the links.
func TestBacklogs_PagesThroughALongListing(t *testing.T) {
	f := newFixture(t)
	for range 60 {
		f.run(f.st, "quarantined", false)
	}
	const total = 61 // and the fixture's own
	_, body := f.get("/console/backlogs?cancelled=0", f.reader)
	section := func(body, id string) string {
		i := strings.Index(body, `id="`+id+`"`)
		j := strings.Index(body[i:], "</section>")
		return body[i : i+j]
	}
	q := section(body, "quarantined")
	if n := strings.Count(q, `class="run"`); n != pageSize {
		t.Fatalf("page 1 shows %d quarantined runs, want %d", n, pageSize)
	}
	if !strings.Contains(q, `<span class="count">61</span>`) {
		t.Errorf("the section does not give the whole count %d", total)
	}
	next := `href="/console/backlogs?cancelled=0&amp;quarantined=1"`
	if !strings.Contains(q, next) {
		t.Fatalf("page 1 has no link %s:\n%s", next, q)
	}
	_, body = f.get("/console/backlogs?cancelled=0&quarantined=1", f.reader)
	q = section(body, "quarantined")
	if n := strings.Count(q, `class="run"`); n != total-pageSize {
		t.Errorf("page 2 shows %d quarantined runs, want %d", n, total-pageSize)
	}
	if !strings.Contains(q, `href="/console/backlogs?cancelled=0&amp;quarantined=0"`) || strings.Contains(q, "next page") {
		t.Errorf("page 2 links wrong:\n%s", q)
	}
	if !strings.Contains(section(body, "cancelled"), f.cancelled.String()) {
		t.Errorf("paging quarantined lost the cancelled section")
	}
}
