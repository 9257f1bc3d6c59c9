package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// TestClient_RoundTrip drives the API through the Client: leases, append,
// seal, records, signing, and proofs that verify against the signed root.
func TestClient_RoundTrip(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	r1 := ts.sealedRun(3)
	ts.sealedRun(4)
	n, err := ts.c.SignCheckpoint(ctx)
	if err != nil || !strings.Contains(string(n), "\n2\n") {
		t.Fatalf("sign: %q %v", n, err)
	}
	cp, err := ts.st.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := ts.c.Inclusion(ctx, r1, 2)
	if err != nil || inc.Index != 0 || inc.Size != 2 {
		t.Fatalf("inclusion: %+v %v", inc, err)
	}
	hs, err := DecodeHashes(inc.Proof)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ts.c.Head(ctx, r1)
	if err != nil || h.Seq != 3 {
		t.Fatalf("head: %+v %v", h, err)
	}
	if err := log.VerifyInclusion(log.Hash(h.Hash), inc.Index, 2, toLog(hs), log.Hash(cp.Root)); err != nil {
		t.Fatalf("inclusion does not verify: %v", err)
	}
	if _, err := ts.c.Consistency(ctx, 1, 2); err != nil {
		t.Fatalf("consistency: %v", err)
	}
	// Refusals come back as *Error of their class.
	if _, err := ts.c.Acquire(ctx, r1, "another", time.Minute); !errors.Is(err, ErrConflict) {
		t.Fatalf("acquire of a held lease: %v, want a conflict", err)
	}
	anon, _ := NewClient(ts.url, ClientOptions{})
	if _, err := anon.Checkpoint(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
}

func toLog(ds []store.Digest) []log.Hash {
	out := make([]log.Hash, len(ds))
	for i, d := range ds {
		out[i] = log.Hash(d)
	}
	return out
}

// TestClient_RefusesRedirectElsewhere stops issue 11 item 8: a server
// (or whoever answers for it) redirecting the monitor to another host
// would move its trust, and its credentials, there.
func TestClient_RefusesRedirectElsewhere(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the client followed a redirect to another host: %s", r.URL)
	}))
	defer elsewhere.Close()
	same := 0
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away/v1/checkpoint":
			http.Redirect(w, r, elsewhere.URL+"/v1/checkpoint", http.StatusFound)
		case "/moved/v1/checkpoint":
			http.Redirect(w, r, srv.URL+"/here/v1/checkpoint", http.StatusFound)
		case "/here/v1/checkpoint":
			same++
			w.Write([]byte("note\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL+"/away", ClientOptions{Token: "secret"})
	if _, err := c.Checkpoint(context.Background()); !errors.Is(err, ErrRedirect) {
		t.Fatalf("redirect to another host: %v", err)
	}
	c, _ = NewClient(srv.URL+"/moved", ClientOptions{})
	if b, err := c.Checkpoint(context.Background()); err != nil || string(b) != "note\n" || same != 1 {
		t.Fatalf("redirect on the same host: %q %v", b, err)
	}
}

// TestClient_RefusesHTTPSDowngrade: a redirect from https to http would
// hand the answer, and the token, to anyone on the path.
func TestClient_RefusesHTTPSDowngrade(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the client followed a redirect to http: %s", r.URL)
	}))
	defer plain.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(plain.URL, "127.0.0.1", "localhost", 1)+r.URL.Path, http.StatusFound)
	}))
	defer tls.Close()
	c, _ := NewClient(tls.URL, ClientOptions{HTTPClient: tls.Client()})
	if _, err := c.Checkpoint(context.Background()); !errors.Is(err, ErrRedirect) {
		t.Fatalf("https to http: %v", err)
	}
	// The same host on another scheme is refused too.
	if err := checkRedirect(httptestReq(t, "http://a.example/x"), []*http.Request{httptestReq(t, "https://a.example/")}); !errors.Is(err, ErrRedirect) {
		t.Fatalf("same host, https to http: %v", err)
	}
}

func httptestReq(t *testing.T, u string) *http.Request {
	t.Helper()
	r, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRedact_HidesCredentials: logs and evidence name the server without
// the secrets an operator may have put in its URL.
func TestRedact_HidesCredentials(t *testing.T) {
	for _, tc := range []struct{ in, secret string }{
		{"https://user:hunter2@log.example/acme", "hunter2"},
		{"https://tok3n@log.example/acme", "tok3n"},
		{"https://log.example/acme?tenant=acme&token=s3cret", "s3cret"},
		{"https://log.example/acme?ACCESS_TOKEN=s3cret", "s3cret"},
		{"https://us er:pw\x7f@log.example/", "pw"},
	} {
		got := Redact(tc.in)
		if strings.Contains(got, tc.secret) {
			t.Errorf("Redact(%q) = %q", tc.in, got)
		}
	}
	if got := Redact("https://log.example/acme?tenant=acme"); got != "https://log.example/acme?tenant=acme" {
		t.Errorf("a URL without secrets changed: %q", got)
	}
	// Errors from the transport name the URL redacted.
	c, _ := NewClient("http://user:hunter2@127.0.0.1:1/", ClientOptions{})
	if _, err := c.Checkpoint(context.Background()); err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "user") {
		t.Fatalf("transport error: %v", err)
	}
}
