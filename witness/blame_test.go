package witness

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runseal/runseal/internal/journaltest"
)

// TestAddCheckpoint_ClientGoneLogsNoError is issue 27 item 8 for the
// witness: 20 add-checkpoint requests whose clients went away were each
// logged at ERROR as a failure of the witness. None may be now; a failure
// of the witness's own state still is.
func TestAddCheckpoint_ClientGoneLogsNoError(t *testing.T) {
	e := newEnv(t)
	l := journaltest.NewLog(t, "log.example/a")
	e.addLog(l)
	l.Tree.Grow(1)
	body := request(0, nil, l.Note(t, 1, nil))
	h, err := e.w.Handler("")
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		req := httptest.NewRequestWithContext(gone, "POST", "/add-checkpoint", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 503 {
			t.Fatalf("a request whose client went away: status %d", rec.Code)
		}
	}
	if n := strings.Count(e.logBuf.String(), "level=ERROR"); n != 0 {
		t.Fatalf("%d ERROR records for 20 requests their clients abandoned, want 0:\n%s", n, e.logBuf)
	}
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := e.post(body); code != 503 {
		t.Fatalf("closed state: status %d, want 503", code)
	}
	if n := strings.Count(e.logBuf.String(), "level=ERROR"); n == 0 {
		t.Fatalf("no ERROR record for a failure of the witness's state:\n%s", e.logBuf)
	}
}
