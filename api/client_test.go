package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

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
