package connlimit_test

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/connlimit"
	"github.com/runseal/runseal/internal/logtest"
)

// serve serves an "ok" handler on a Listener with cfg on 127.0.0.1.
func serve(t *testing.T, cfg connlimit.Config) (*connlimit.Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := connlimit.New(inner, cfg)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln, inner.Addr().String()
}

// client is one keep-alive connection from a chosen loopback address.
type client struct {
	c  net.Conn
	br *bufio.Reader
}

func dialFrom(t *testing.T, from, addr string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, br: bufio.NewReader(c)}
}

// get sends GET /healthz on the connection and returns the answer.
func (c *client) get(t *testing.T) *http.Response {
	t.Helper()
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c.c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp
}

// flood opens n keep-alive connections from 127.0.0.1, each with one
// answered request, and returns how many were answered 200 and 503.
func flood(t *testing.T, addr string, n int) (ok, refused int, clients []*client) {
	t.Helper()
	for range n {
		c := dialFrom(t, "127.0.0.1", addr)
		resp := c.get(t)
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
			clients = append(clients, c)
		case http.StatusServiceUnavailable:
			refused++
			if resp.Header.Get("Retry-After") == "" || !resp.Close {
				t.Errorf("a refusal without Retry-After or Connection: close: %v", resp.Header)
			}
			c.c.Close()
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	return ok, refused, clients
}

// TestListener_IdleKeepAliveFloodLeavesRoomForOthers: one address holding
// idle keep-alive connections gets MaxPerAddr of them, every further one
// is answered 503 at once, and another address is still served.
func TestListener_IdleKeepAliveFloodLeavesRoomForOthers(t *testing.T) {
	_, logger := logtest.New()
	ln, addr := serve(t, connlimit.Config{MaxConns: 10, MaxPerAddr: 3, Logger: logger})
	ok, refused, _ := flood(t, addr, 20)
	if ok != 3 || refused != 17 {
		t.Fatalf("flood: %d served and %d refused; want 3 and 17", ok, refused)
	}
	if resp := dialFrom(t, "127.0.0.2", addr).get(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("another address: status %d", resp.StatusCode)
	}
	if s := ln.Stats(); s.Open != 4 || s.Refused != 17 {
		t.Fatalf("stats %+v; want 4 open, 17 refused", s)
	}
}

// TestListener_TotalBoundAcrossAddresses: MaxConns holds across addresses.
func TestListener_TotalBoundAcrossAddresses(t *testing.T) {
	_, addr := serve(t, connlimit.Config{MaxConns: 3, MaxPerAddr: -1, Logger: slog.New(slog.DiscardHandler)})
	for i, from := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		want := http.StatusOK
		if i == 3 {
			want = http.StatusServiceUnavailable
		}
		if got := dialFrom(t, from, addr).get(t).StatusCode; got != want {
			t.Fatalf("connection %d from %s: status %d, want %d", i, from, got, want)
		}
	}
}

// TestListener_RefusalsLoggedOncePerEpisode: many refusals make one WARN;
// the episode's end is one INFO with the count; a later refusal starts a
// new episode with its own WARN.
func TestListener_RefusalsLoggedOncePerEpisode(t *testing.T) {
	recs, logger := logtest.New()
	_, addr := serve(t, connlimit.Config{MaxConns: 10, MaxPerAddr: 2, Quiet: 50 * time.Millisecond, Logger: logger})
	_, refused, held := flood(t, addr, 22)
	if refused != 20 {
		t.Fatalf("refused %d, want 20", refused)
	}
	end := recs.Wait(t, slog.LevelInfo, "no longer refusing")
	if n := recs.Count(slog.LevelWarn); n != 1 {
		t.Fatalf("%d WARN records for one episode of 20 refusals, want 1", n)
	}
	var counted uint64
	end.Attrs(func(a slog.Attr) bool {
		if a.Key == "refused_per_address_limit" {
			counted = a.Value.Uint64()
		}
		return true
	})
	if counted != 20 {
		t.Fatalf("the episode's end counts %d refusals, want 20", counted)
	}
	for _, c := range held {
		c.c.Close()
	}
	_, refused, _ = flood(t, addr, 3)
	if refused != 1 {
		t.Fatalf("second flood refused %d, want 1", refused)
	}
	if n := recs.Count(slog.LevelWarn); n != 2 {
		t.Fatalf("%d WARN records after a second episode, want 2", n)
	}
}

// TestListener_SilentCloses: with Silent an over-limit connection is closed
// without an answer.
func TestListener_SilentCloses(t *testing.T) {
	_, addr := serve(t, connlimit.Config{MaxConns: 1, Silent: true, Logger: slog.New(slog.DiscardHandler)})
	dialFrom(t, "127.0.0.1", addr).get(t)
	c := dialFrom(t, "127.0.0.2", addr)
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if b, err := io.ReadAll(c.c); len(b) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("silent refusal sent %q, %v", b, err)
	}
}

// TestListener_ClosedConnFreesSlot: a closed connection's slot is given
// back once, however often it is closed.
func TestListener_ClosedConnFreesSlot(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := connlimit.New(inner, connlimit.Config{MaxConns: 2, MaxPerAddr: 2})
	defer ln.Close()
	for range 2 {
		dialFrom(t, "127.0.0.1", inner.Addr().String()) // completes in the backlog
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	a.Close()
	if s := ln.Stats(); s.Open != 1 {
		t.Fatalf("open %d after closing one of two twice, want 1", s.Open)
	}
	b.Close()
}

func TestForFiles(t *testing.T) {
	for _, tc := range []struct {
		n             uint64
		total, perAdd int
	}{
		{0, 8, 2},
		{20, 10, 2},
		{300, 150, 18},
		{1024, 512, 64},
		{1 << 20, 4096, 512},
	} {
		c := connlimit.ForFiles(tc.n)
		if c.MaxConns != tc.total || c.MaxPerAddr != tc.perAdd {
			t.Errorf("ForFiles(%d) = %d, %d; want %d, %d", tc.n, c.MaxConns, c.MaxPerAddr, tc.total, tc.perAdd)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		cfg  connlimit.Config
		fail bool
	}{
		{connlimit.Config{}, false},
		{connlimit.Config{MaxConns: 10, MaxPerAddr: 10}, false},
		{connlimit.Config{MaxConns: 10, MaxPerAddr: -1}, false},
		{connlimit.Config{MaxConns: 10, MaxPerAddr: 11}, true},
		{connlimit.Config{MaxConns: -1}, true},
	} {
		if err := tc.cfg.Check(); (err != nil) != tc.fail {
			t.Errorf("%+v: Check() = %v", tc.cfg, err)
		}
	}
}
