package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/runseal/runseal/verifypage"
)

// TestServeVerifyPageWithoutToken: journal serve answers the verify page
// and its files without a token, with its Content-Security-Policy, while
// the API beside it still refuses requests without one.
func TestServeVerifyPageWithoutToken(t *testing.T) {
	db := newJournal(t)
	sv := startServe(t, db)
	for _, c := range []struct {
		path, ctype string
	}{
		{"/verify/", "text/html"},
		{"/verify/verify.js", "text/javascript"},
		{"/verify/wasm_exec.js", "text/javascript"},
		{"/verify/verify.css", "text/css"},
		{"/verify/verify.wasm", "application/wasm"},
	} {
		resp, err := http.Get(sv.base + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) || len(b) == 0 {
			t.Errorf("GET %s: %d %s, %d bytes", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != verifypage.CSP {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q", c.path, got, verifypage.CSP)
		}
	}
	resp, err := http.Get(sv.base + "/verify") // follows the redirect to /verify/
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/verify/" {
		t.Errorf("GET /verify: %d at %s, want 200 at /verify/", resp.StatusCode, resp.Request.URL.Path)
	}
	if code, _ := sv.do("GET", "/v1/runs", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/runs without a token: %d, want 401", code)
	}
	if code, _ := sv.do("GET", "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("GET /healthz: %d", code)
	}
}
