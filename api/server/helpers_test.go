package server

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/checkpointer"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// testServer is a Server over a fresh SQLite journal on a loopback
// listener, with a writer token.
type testServer struct {
	t     testing.TB
	st    *sqlite.Store
	srv   *Server
	url   string
	token string
	c     *api.Client
}

type serverOpt func(*Config, *Timeouts)

func startServer(t testing.TB, opts ...serverOpt) *testServer {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	skey, vkey, err := checkpoint.GenerateLogKey(rand.Reader, st.Origin())
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := checkpoint.SignerForOrigin(skey, st.Origin())
	if err != nil {
		t.Fatal(err)
	}
	logKey, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := Config{
		Tenants: []Tenant{{Store: st, LogKey: logKey, Signer: checkpointer.New(checkpointer.Config{Store: st, Signer: signer, Logger: quiet})}},
		Tokens:  st, Logger: quiet,
	}
	var to Timeouts
	for _, o := range opts {
		o(&cfg, &to)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(s, to, quiet)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	id, secret, hash, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateToken(ctx, store.Token{ID: id, Tenant: store.DefaultTenant, Role: store.RoleWriter, Hash: hash}); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, st: st, srv: s, url: "http://" + ln.Addr().String(), token: secret}
	ts.c, err = api.NewClient(ts.url, api.ClientOptions{Token: secret})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// do sends a raw request with the writer token and returns the status,
// headers and body.
func (ts *testServer) do(method, path, body string) (int, http.Header, string) {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ts.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// sealedRun leases a run, appends n records to it, and seals it.
func (ts *testServer) sealedRun(n int) store.RunID {
	ts.t.Helper()
	ctx := context.Background()
	run := store.NewRunID()
	l, err := ts.c.Acquire(ctx, run, "w", time.Minute)
	if err != nil {
		ts.t.Fatal(err)
	}
	body := line(run, "RunAdmitted", `"source":"api"`)
	for range n - 2 {
		body += line(run, "Note", `"text":"x"`)
	}
	body += line(run, "RunConcluded", `"outcome":"succeeded"`)
	if _, err := ts.c.Append(ctx, l.Epoch, []byte(body)); err != nil {
		ts.t.Fatal(err)
	}
	if _, err := ts.c.Seal(ctx, run, l.Epoch, "succeeded"); err != nil {
		ts.t.Fatal(err)
	}
	return run
}

func line(run store.RunID, kind string, extra string) string {
	s := `{"run":"` + run.String() + `","kind":"` + kind + `"`
	if extra != "" {
		s += "," + extra
	}
	return s + "}\n"
}
