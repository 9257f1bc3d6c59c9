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

// serve serves an "ok" handler on a Listener with cfg on 127.0.0.1; the
// server does not report connection states, so no idle connection is
// closed for a new one.
func serve(t *testing.T, cfg connlimit.Config) (*connlimit.Listener, string) {
	return serveStates(t, cfg, false)
}

// serveStates is serve, with the server reporting its connections' states
// to the listener when states is set.
func serveStates(t *testing.T, cfg connlimit.Config, states bool) (*connlimit.Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := connlimit.New(inner, cfg)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})}
	if states {
		srv.ConnState = ln.ConnState
	}
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

// waitOpen waits until the listener holds n connections: a client's close
// reaches the server's side of the connection later than the client's
// Close returns.
func waitOpen(t *testing.T, ln *connlimit.Listener, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ln.Stats().Open != n {
		if time.Now().After(deadline) {
			t.Fatalf("the listener still holds %d connections, want %d", ln.Stats().Open, n)
		}
		time.Sleep(time.Millisecond)
	}
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
	ln, addr := serve(t, connlimit.Config{MaxConns: 10, MaxPerAddr: 2, Quiet: 50 * time.Millisecond, Logger: logger})
	_, refused, held := flood(t, addr, 22)
	if refused != 20 {
		t.Fatalf("refused %d, want 20", refused)
	}
	end := recs.Wait(t, slog.LevelInfo, "no longer at the connection limit")
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
	// The server closes its side when it reads the client's close, which
	// can be after the next dial: wait until the slots are given back.
	waitOpen(t, ln, 0)
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

// waitIdle waits until the listener knows n connections to be idle.
func waitIdle(t *testing.T, ln *connlimit.Listener, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ln.Stats().Idle != n {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v; want %d idle", ln.Stats(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestListener_IdleConnectionMakesRoomAtTotalBound: at the total bound, a
// flood of idle keep-alive connections from many addresses does not shut a
// new client out: the longest idle connection of the address holding most
// is closed for it.
func TestListener_IdleConnectionMakesRoomAtTotalBound(t *testing.T) {
	ln, addr := serveStates(t, connlimit.Config{MaxConns: 3, MaxPerAddr: -1, MinIdle: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)}, true)
	var held []*client
	for i, from := range []string{"127.0.0.2", "127.0.0.1", "127.0.0.1"} {
		c := dialFrom(t, from, addr)
		if got := c.get(t).StatusCode; got != http.StatusOK {
			t.Fatalf("from %s: status %d", from, got)
		}
		waitIdle(t, ln, i+1) // so they go idle in this order
		held = append(held, c)
	}
	if got := dialFrom(t, "127.0.0.3", addr).get(t).StatusCode; got != http.StatusOK {
		t.Fatalf("a new client at the bound with idle connections open: status %d, want 200", got)
	}
	if s := ln.Stats(); s.Open != 3 || s.ClosedIdle != 1 || s.Refused != 0 {
		t.Fatalf("stats %+v; want 3 open, 1 idle closed, none refused", s)
	}
	// The one closed is 127.0.0.1's first (its address holds most, and it
	// is the longer idle of the two).
	held[1].c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := held[1].br.ReadByte(); err != io.EOF {
		t.Fatalf("the connection to close: read %v, want EOF", err)
	}
	if got := held[0].get(t).StatusCode; got != http.StatusOK {
		t.Fatalf("127.0.0.2's connection after the closing: status %d", got)
	}
}

// TestListener_BusyConnectionsAreNeverClosed: connections whose request
// is being served are not closed for a new one; the new one is refused.
func TestListener_BusyConnectionsAreNeverClosed(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := connlimit.New(inner, connlimit.Config{MaxConns: 2, MaxPerAddr: -1, MinIdle: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)})
	started, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
	}), ConnState: ln.ConnState}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := inner.Addr().String()
	var busy []*client
	for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
		c := dialFrom(t, from, addr)
		io.WriteString(c.c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		<-started
		busy = append(busy, c)
	}
	if got := dialFrom(t, "127.0.0.3", addr).get(t).StatusCode; got != http.StatusServiceUnavailable {
		t.Fatalf("a new client with only busy connections open: status %d, want 503", got)
	}
	close(release)
	for _, c := range busy {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a busy connection's request: %v, %v", resp, err)
		}
	}
	if s := ln.Stats(); s.ClosedIdle != 0 || s.Refused != 1 {
		t.Fatalf("stats %+v; want none closed, 1 refused", s)
	}
}
