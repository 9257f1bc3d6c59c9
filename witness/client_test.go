package witness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClientAnswers checks how the client reads each kind of answer, from a
// fake witness that can answer anything.
func TestClientAnswers(t *testing.T) {
	sig := "\u2014 witness.example/w1 AAAAAQ==\n"
	cases := []struct {
		name    string
		status  int
		ctype   string
		header  map[string]string
		body    string
		want    error
		size    uint64 // for a *ConflictError
		retry   time.Duration
		lines   string
		checkSE bool
	}{
		{name: "200", status: 200, body: sig + sig, lines: sig + sig},
		{name: "200 not signature lines", status: 200, body: "ok\n", want: ErrUnexpectedResponse},
		{name: "200 without final newline", status: 200, body: strings.TrimSuffix(sig, "\n"), want: ErrUnexpectedResponse},
		{name: "200 empty", status: 200, body: "", want: ErrUnexpectedResponse},
		{name: "409 with size", status: 409, ctype: "text/x.tlog.size", body: "42\n", want: ErrConflict, size: 42},
		{name: "409 with size and parameters", status: 409, ctype: "text/x.tlog.size; charset=utf-8", body: "0\n", want: ErrConflict, size: 0},
		{name: "409 size not canonical", status: 409, ctype: "text/x.tlog.size", body: "042\n", want: ErrUnexpectedResponse},
		{name: "409 size without newline", status: 409, ctype: "text/x.tlog.size", body: "42", want: ErrUnexpectedResponse},
		{name: "409 without size (tlog-witness v1.0.0 root mismatch)", status: 409, ctype: "text/plain", body: "root mismatch\n", want: ErrInconsistent, checkSE: true},
		{name: "400", status: 400, want: ErrMalformedRequest, checkSE: true},
		{name: "413", status: 413, want: ErrMalformedRequest, checkSE: true},
		{name: "403", status: 403, want: ErrNotTrusted, checkSE: true},
		{name: "404", status: 404, want: ErrUnknownLog, checkSE: true},
		{name: "422", status: 422, want: ErrInconsistent, checkSE: true},
		{name: "429 seconds", status: 429, header: map[string]string{"Retry-After": "7"}, want: ErrRateLimited, retry: 7 * time.Second, checkSE: true},
		{name: "429 date", status: 429, header: map[string]string{"Retry-After": time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}, want: ErrRateLimited, retry: time.Hour, checkSE: true},
		{name: "429 garbage", status: 429, header: map[string]string{"Retry-After": "soon"}, want: ErrRateLimited, checkSE: true},
		{name: "503", status: 503, header: map[string]string{"Retry-After": "3"}, want: ErrUnavailable, retry: 3 * time.Second, checkSE: true},
		{name: "500", status: 500, want: ErrUnexpectedResponse, checkSE: true},
		{name: "302", status: 302, want: ErrUnexpectedResponse, checkSE: true},
		{name: "oversized", status: 200, body: strings.Repeat(sig, maxResponseSize/len(sig)+1), want: ErrUnexpectedResponse},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = io.ReadAll(r.Body)
				if r.Method != http.MethodPost || r.URL.Path != "/p/add-checkpoint" {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				if c.ctype != "" {
					w.Header().Set("Content-Type", c.ctype)
				}
				for k, v := range c.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			cl, err := NewClient(srv.URL+"/p", srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			proof := [][32]byte{{1}, {2}}
			lines, err := cl.AddCheckpoint(context.Background(), 3, proof, []byte("note\n"))
			if want := string(request(3, proof, []byte("note\n"))); string(got) != want {
				t.Errorf("sent %q, want %q", got, want)
			}
			if c.want == nil {
				if err != nil || string(lines) != c.lines {
					t.Fatalf("got %q, %v", lines, err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if c.want == ErrConflict {
				var ce *ConflictError
				if !errors.As(err, &ce) || ce.Size != c.size {
					t.Fatalf("got %v, want size %d", err, c.size)
				}
			}
			if c.checkSE {
				var se *StatusError
				if !errors.As(err, &se) || se.StatusCode != c.status {
					t.Fatalf("got %#v, want a *StatusError with %d", err, c.status)
				}
				if d := se.RetryAfter - c.retry; d < -2*time.Second || d > 0 {
					t.Errorf("RetryAfter = %v, want %v", se.RetryAfter, c.retry)
				}
			}
		})
	}
}

func TestNewClient(t *testing.T) {
	for _, bad := range []string{"", "witness.example", "ftp://witness.example", "https://", "https://u:p@witness.example", "https://witness.example/?a=b", "https://witness.example/#f"} {
		if _, err := NewClient(bad, nil); err == nil {
			t.Errorf("NewClient(%q) accepted", bad)
		}
	}
	c, err := NewClient("https://witness.example/a/", nil)
	if err != nil || c.prefix != "https://witness.example/a" {
		t.Fatalf("%v %+v", err, c)
	}
}

func TestClientTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, _ := NewClient(url, nil)
	_, err := c.AddCheckpoint(context.Background(), 0, nil, []byte("x"))
	if err == nil || errors.Is(err, ErrUnexpectedResponse) {
		t.Fatalf("closed server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.AddCheckpoint(ctx, 0, nil, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	if _, err := c.AddCheckpoint(context.Background(), 0, nil, nil); !errors.Is(err, ErrMalformedRequest) {
		t.Fatalf("empty note: %v", err)
	}
}

// FuzzReadAddCheckpointResponse checks that reading an add-checkpoint
// answer never panics, accepts as cosignature lines only a 200 of
// signature lines, and takes a 409's size only from a tlog size body.
func FuzzReadAddCheckpointResponse(f *testing.F) {
	for _, s := range []struct {
		code  int
		ctype string
		body  string
	}{
		{200, "text/plain", "\u2014 w.example AAAAAA==\n"},
		{200, "text/plain", "\u2014 w.example AAAAAA==\n\u2014 v.example BBBB\n"},
		{200, "text/plain", "not lines"},
		{409, ContentTypeTlogSize, "7\n"},
		{409, ContentTypeTlogSize, "07\n"},
		{409, "text/plain", "7\n"},
		{429, "text/plain", "slow down\n"},
		{503, "", ""},
	} {
		f.Add(s.code, s.ctype, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, code int, ctype string, body []byte) {
		if code < 100 || code > 999 {
			return
		}
		resp := &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {ctype}}, Body: io.NopCloser(bytes.NewReader(body))}
		lines, err := ReadAddCheckpointResponse(resp)
		if err == nil {
			if code != http.StatusOK || !isSignatureLines(lines) || !bytes.Equal(lines, body) {
				t.Fatalf("accepted %d %q as cosignature lines", code, body)
			}
			return
		}
		if lines != nil {
			t.Fatalf("lines %q beside error %v", lines, err)
		}
		var ce *ConflictError
		if errors.As(err, &ce) {
			if code != http.StatusConflict || string(body) != strconv.FormatUint(ce.Size, 10)+"\n" {
				t.Fatalf("size %d from %d %q", ce.Size, code, body)
			}
		}
	})
}
