package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runseal/runseal/api/server"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/internal/logtest"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// brokenTokens fails every call once broken is set, as a store on a
// failed disk does.
type brokenTokens struct {
	store.TokenStore
	broken atomic.Bool
}

func (b *brokenTokens) Tokens(ctx context.Context) ([]store.Token, error) {
	if b.broken.Load() {
		return nil, errors.New("disk I/O error")
	}
	return b.TokenStore.Tokens(ctx)
}

// TestSignIn_TruncatedBodiesLogNoError is issue 27 item 8: 20 sign-ins
// whose body was cut short (the client gone mid-request) wrote 20 ERROR
// lines. None may now; a failure of the token store's own still logs one.
func TestSignIn_TruncatedBodiesLogNoError(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs, logger := logtest.New()
	toks := &brokenTokens{TokenStore: st}
	tenants := []server.Tenant{{Store: st, LogKey: journaltest.NewLog(t, st.Origin()).Verifier}}
	con, err := New(Config{Tenants: tenants, Tokens: toks, Logger: logger, Heavy: apiServer(t, tenants, st)})
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{}, 100)
	h := con.Handler(http.NotFoundHandler())
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		handled <- struct{}{}
	}))
	t.Cleanup(hs.Close)
	for range 20 {
		c, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /console/signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 80\r\n\r\ntoken=rs_")
		c.Close()
		<-handled
	}
	if n := logs.Count(slog.LevelError); n != 0 {
		t.Fatalf("%d ERROR records for 20 truncated sign-ins, want 0", n)
	}
	toks.broken.Store(true)
	resp, err := http.Get(hs.URL + "/console/signin")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-handled
	if n := logs.Count(slog.LevelError); n != 1 {
		t.Fatalf("%d ERROR records for one failure of the token store, want 1", n)
	}
}
