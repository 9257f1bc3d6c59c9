package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// TestAppend_AnswerIsSizedNotChunked: the append answer goes out with its
// Content-Length (one write, no chunk framing), on a connection kept
// alive for the client's next append.
func TestAppend_AnswerIsSizedNotChunked(t *testing.T) {
	ts := startServer(t)
	run := store.NewRunID()
	l, err := ts.c.Acquire(context.Background(), run, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i, body := range []string{line(run, "RunAdmitted", `"source":"api"`), line(run, "Note", `"text":"x"`)} {
		fmt.Fprintf(conn, "POST /v1/append?epoch=%d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", l.Epoch, ts.token, len(body), body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("append %d on the kept connection: %v", i+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("append %d: %d %s %v", i+1, resp.StatusCode, b, err)
		}
		if len(resp.TransferEncoding) != 0 || resp.Header.Get("Content-Length") != strconv.Itoa(len(b)) || resp.Close {
			t.Fatalf("append %d: transfer-encoding %v, content-length %q for %d bytes, close %v; want sized, kept alive",
				i+1, resp.TransferEncoding, resp.Header.Get("Content-Length"), len(b), resp.Close)
		}
	}
}

// TestAppend_EscapedTenantInQueryIsTheTenantAuthorized: the tenant the
// token is checked against is the one url.ParseQuery reads, escapes and
// all, so a query cannot name one tenant to the authorization and another
// to a later reader of the same query.
func TestAppend_EscapedTenantInQueryIsTheTenantAuthorized(t *testing.T) {
	ts := startServer(t)
	for _, q := range []string{"ten%61nt=other", "tenant=oth%65r", "tenant=other&tenant=default", "x=1&ten%61nt=other"} {
		code, _, body := ts.do("POST", "/v1/append?epoch=1&"+q, line(store.NewRunID(), "Note", `"text":"x"`))
		if code != http.StatusForbidden || !strings.Contains(body, `not \"other\"`) {
			t.Errorf("?%s: %d %s, want 403 naming tenant other", q, code, body)
		}
	}
}
