//go:build linux

package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServe_IdleKeepAliveFloodLeavesRoomForOthers: with --max-conns-per-addr
// 2, a client holding two idle keep-alive connections has its third
// answered 503 at once, while a client from another address is served,
// and the refusals are logged once.
func TestServe_IdleKeepAliveFloodLeavesRoomForOthers(t *testing.T) {
	dir, key := setup(t)
	s := serve(t, dir, key, "--max-conns", "8", "--max-conns-per-addr", "2")
	defer s.stop()
	addr := strings.TrimPrefix(s.url, "http://")
	get := func(from string) int {
		t.Helper()
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(c, "GET /"+strings.Repeat("0", 64)+"/checkpoint HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("from %s: no answer: %v", from, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 6 {
		want := http.StatusNotFound // an unknown log: the witness answered
		if i >= 2 {
			want = http.StatusServiceUnavailable
		}
		if got := get("127.0.0.1"); got != want {
			t.Fatalf("flood connection %d: status %d, want %d", i, got, want)
		}
	}
	if got := get("127.0.0.2"); got != http.StatusNotFound {
		t.Fatalf("another address during the flood: status %d, want the witness's 404", got)
	}
	if n := strings.Count(s.stderr.String(), "connlimit: connection limit reached"); n != 1 {
		t.Fatalf("%d log records of refusals for 4 refused connections, want 1:\n%s", n, s.stderr)
	}
}
