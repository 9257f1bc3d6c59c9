package server

import (
	"net/http"
	"testing"
)

// TestServe_EveryV1AnswerIsNosniff is issue 27 item 6: answers under /v1/
// lacked X-Content-Type-Options: nosniff, so a browser could sniff a
// record's bytes or an error body into HTML. Every answer carries it:
// success, refusal, unknown route and unauthenticated alike.
func TestServe_EveryV1AnswerIsNosniff(t *testing.T) {
	ts := startServer(t)
	run := ts.sealedRun(3)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/runs", 200},
		{"GET", "/v1/runs/" + run.String() + "/records", 200},
		{"GET", "/v1/runs/" + run.String() + "/head", 200},
		{"GET", "/v1/runs/not-a-run/head", 400},
		{"POST", "/v1/append?epoch=0", 400},
		{"GET", "/v1/no-such-route", 404},
		{"GET", "/healthz", 200},
	} {
		status, h, _ := ts.do(tc.method, tc.path, "")
		if status != tc.status || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: %d, X-Content-Type-Options %q; want %d, nosniff", tc.method, tc.path, status, h.Get("X-Content-Type-Options"), tc.status)
		}
	}
	resp, err := http.Get(ts.url + "/v1/runs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("GET /v1/runs without a token: %d, X-Content-Type-Options %q; want 401, nosniff", resp.StatusCode, resp.Header.Get("X-Content-Type-Options"))
	}
}
