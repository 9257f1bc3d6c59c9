package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/runseal/runseal/internal/browsertest"
)

// TestConsoleInBrowser drives the console in headless Chromium over a real
// journal (runs, seals, a checkpoint cosigned by a real witness over HTTP,
// a disclosure, a study): it signs in with a reader token (the browser
// keeps a session id its scripts cannot read, not the token), visits every
// page and reads its data, lets the Run page's script check the inclusion
// proof, signs out (the old session id, replayed, is refused), then signs
// in as another tenant, which sees nothing of the first, and revokes that
// token, which lands on sign-in with the reason. Each page is left as a
// screenshot for a reviewer (browsertest.Screenshot).
func TestConsoleInBrowser(t *testing.T) {
	f := newFixture(t)
	ctx := browsertest.New(t)

	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	contains := func(sel string, wants ...string) {
		t.Helper()
		got := text(sel)
		for _, w := range wants {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", sel, got, w)
			}
		}
	}
	visit := func(path, waitFor string) {
		t.Helper()
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(f.url+path))
		if err != nil {
			t.Fatalf("navigate %s: %v", path, err)
		}
		csp, _ := resp.Headers["Content-Security-Policy"].(string)
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: the browser got CSP %q", path, csp)
		}
		if xfo, _ := resp.Headers["X-Frame-Options"].(string); xfo != "DENY" {
			t.Errorf("%s: the browser got X-Frame-Options %q", path, xfo)
		}
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(waitFor))); err != nil {
			t.Fatalf("%s: %s not shown: %v", path, waitFor, err)
		}
	}
	signIn := func(tok string) {
		t.Helper()
		visit("/", "#token")
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS("#token"), tok),
			chromedp.Click(chromedp.CSS("#signin")),
			chromedp.WaitVisible(chromedp.CSS("#origin")),
		); err != nil {
			t.Fatalf("sign in: %v", err)
		}
	}

	// sessionCookie is the browser's session cookie for the console.
	sessionCookie := func() *network.Cookie {
		t.Helper()
		res, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (network.GetCookiesResult, error) {
			return cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{f.url + "/"}})
		})
		if err != nil {
			t.Fatalf("the browser's cookies: %v", err)
		}
		for _, c := range res.Cookies {
			if c.Name == CookieName {
				return c
			}
		}
		return nil
	}

	// Sign-in, then the Log page it leads to.
	visit("/", "#token")
	browsertest.Screenshot(t, ctx, "0-signin")
	signIn(f.reader)
	ck := sessionCookie()
	if ck == nil || !ck.HTTPOnly || ck.SameSite != network.CookieSameSiteStrict || strings.Contains(ck.Value, f.reader[3:]) {
		t.Fatalf("the browser's session cookie %+v: want HttpOnly, SameSite=Strict, not the token", ck)
	}
	if jsCookies, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || strings.Contains(jsCookies, ck.Value) {
		t.Errorf("the page's script reads the session cookie (%v): %q", err, jsCookies)
	}
	contains("#origin", f.st.Origin())
	contains("#witnessed-size", fmt.Sprint(f.witnessedSize))
	contains("#witnesses", f.witnessName, fmt.Sprint(f.witnessedSize))
	contains("#quorum", "quorum "+f.witnessName)
	contains("#tenant", "default")
	browsertest.Screenshot(t, ctx, "1-log")

	// The CSP is enforced, not only sent: an inline script put in the page
	// does not run, while the page's own script file does (below).
	ran, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(function(){const s=document.createElement("script"); s.textContent="window.inlineRan=true"; document.body.appendChild(s); return window.inlineRan===true;})()`))
	if err != nil || ran {
		t.Errorf("an inline script ran in a console page (%v): the CSP is not enforced", err)
	}

	visit("/console/activity", "#hour-appends")
	contains("#hour-appends", "1 requests", fmt.Sprintf("%d records", f.apiRecords))
	contains("#hour-seals", "1")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.chart rect").length`))
	if err != nil || n < 2 {
		t.Errorf("Activity plots: %d bars, %v; want the appends and the seal drawn", n, err)
	}
	browsertest.Screenshot(t, ctx, "2-activity")

	visit("/console/backlogs", "#abandoned")
	contains("#abandoned", f.abandoned.String())
	contains("#waiting", f.waiting.String(), "time")
	contains("#quarantined", f.quarantined.String())
	contains("#cancelled", f.cancelled.String())
	browsertest.Screenshot(t, ctx, "3-backlogs")

	// A run page, reached by its link; the page's script checks the proof.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#quarantined a.run`)), chromedp.WaitVisible(chromedp.CSS("#run-id"))); err != nil {
		t.Fatalf("follow a run link: %v", err)
	}
	contains("#run-id", f.quarantined.String())
	visit("/console/runs/"+f.cancelled.String(), "#inclusion-browser .pill")
	contains("#run-id", f.cancelled.String())
	contains("#seal", "log index")
	contains("#cancellation", "ops@example.com", "customer withdrew")
	contains("#inclusion-server", "verified")
	contains("#inclusion-browser", "verified in this browser")
	contains("#records", "RunAdmitted", "ToolCalled", "quarterly report", "RunConcluded")
	browsertest.Screenshot(t, ctx, "4-run")

	// The script is not taken on trust: a proof with one hash changed fails.
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`(function(){const e=document.getElementById("inclusion-browser"); const p=e.dataset.proof.split(" "); p[0]=p[0].replace(/^./, c => c==="A"?"B":"A"); e.dataset.proof=p.join(" ");})()`),
		chromedp.Evaluate[chromedp.Void](`(function(){const s=document.createElement("script"); s.src="/console/static/inclusion.js?again"; document.body.appendChild(s);})()`),
		chromedp.WaitVisible(chromedp.CSS("#inclusion-browser .pill.bad")),
	); err != nil {
		t.Fatalf("tampered proof: %v", err)
	}
	contains("#inclusion-browser", "FAILED in this browser")

	visit("/console/disclosures", "#disclosures")
	contains("#disclosures", "Regulator of Examples", "dpo@example.com", fmt.Sprintf("%x", f.disclosure.Package[:]), f.sealedRun.String())
	contains("#tokens", "alice-console", "ci-writer", "reader", "writer")
	browsertest.Screenshot(t, ctx, "5-disclosures")

	visit("/console/studies", "#studies")
	contains("#studies", string(f.study))
	browsertest.Screenshot(t, ctx, "6-studies")
	visit("/console/studies/"+string(f.study), "#trials")
	contains("#study-id", string(f.study))
	contains("#trials", "waiting")
	browsertest.Screenshot(t, ctx, "7-study")

	// Another tenant's token sees its own log and nothing of default's.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header form button`)), chromedp.WaitVisible(chromedp.CSS("#token"))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	if c := sessionCookie(); c != nil {
		t.Errorf("after sign-out the browser still holds the session cookie")
	}
	if resp, _ := f.getCookie("/console/log", ck.Value); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the signed-out session's cookie, replayed: %d, want 401", resp.StatusCode)
	}
	signIn(f.acmeReader)
	contains("#origin", f.acme.Origin())
	contains("#tenant", "acme")
	visit("/console/backlogs", "#abandoned")
	body := text("main")
	for _, run := range []string{f.abandoned.String(), f.waiting.String(), f.quarantined.String(), f.cancelled.String()} {
		if strings.Contains(body, run) {
			t.Errorf("tenant acme's Backlogs show run %s of tenant default", run)
		}
	}
	visit("/console/runs/"+f.sealedRun.String(), "#problem")
	contains("#problem", "has no records in tenant")
	browsertest.Screenshot(t, ctx, "8-other-tenant")

	// Revoked: the next page is the sign-in page, saying so.
	if _, err := f.st.RevokeToken(context.Background(), f.acmeReaderID); err != nil {
		t.Fatal(err)
	}
	visit("/console/log", "#message")
	contains("#message", "revoked")
	browsertest.Screenshot(t, ctx, "9-revoked")
}
