package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// BenchmarkPostAppend is POST /v1/append of one ~200-byte record through
// the server's handler (authorization, body parsing, the store's append,
// the answer), in process, without the network: what journal serve spends
// on one request besides the sockets. allocs/op is the figure to compare
// between versions; ns/op includes the journal's commit.
//
//	go test ./api -run '^$' -bench PostAppend -benchmem
func BenchmarkPostAppend(b *testing.B) {
	ts := startServer(b)
	ctx := context.Background()
	run := store.NewRunID()
	l, err := ts.c.Acquire(ctx, run, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	body := line(run, "Note", `"text":"`+strings.Repeat("x", 100)+`"`)
	target := "/v1/append?epoch=" + strconv.FormatUint(uint64(l.Epoch), 10)
	auth := "Bearer " + ts.token
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		ts.srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("append: %d %s", w.Code, w.Body)
		}
	}
}
