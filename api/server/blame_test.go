package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/runseal/runseal/internal/logtest"
	"github.com/runseal/runseal/store"
)

// slowHead is a store whose Head waits for the request to end, as a read
// of a busy store does while its client gives up, and fails with what
// ends it; a run named failing fails at once, as a broken disk does.
type slowHead struct {
	Store
	entered chan struct{}
	failing store.RunID
}

func (s *slowHead) Head(ctx context.Context, run store.RunID) (store.Head, error) {
	if run == s.failing {
		return store.Head{}, errors.New("disk I/O error")
	}
	s.entered <- struct{}{}
	<-ctx.Done()
	return store.Head{}, fmt.Errorf("reading the head of %s: %w", run, ctx.Err())
}

// TestServe_ClientGoneLogsNoError is issue 27 item 8: 20 requests whose
// clients went away (10 disconnecting while the store answers, 10 with an
// append body cut short) wrote ERROR lines an attacker controls. None may
// now; a failure of the store's own still logs ERROR.
func TestServe_ClientGoneLogsNoError(t *testing.T) {
	logs, logger := logtest.New()
	var sh *slowHead
	ts := startServer(t, func(c *Config, _ *Timeouts) {
		c.Logger = logger
		sh = &slowHead{Store: c.Tenants[0].Store, entered: make(chan struct{}), failing: store.NewRunID()}
		c.Tenants[0].Store = sh
	})
	addr := strings.TrimPrefix(ts.url, "http://")
	send := func(req string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	auth := "Authorization: Bearer " + ts.token + "\r\n"
	for range 10 {
		c := send("GET /v1/runs/" + store.NewRunID().String() + "/head HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n")
		<-sh.entered
		c.Close()
	}
	run := store.NewRunID()
	for range 10 {
		body := line(run, "RunAdmitted", `"source":"api"`)
		c := send(fmt.Sprintf("POST /v1/append?epoch=1 HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s", auth, len(body)+100, body))
		c.Close()
	}
	answered := func(route, code string) float64 {
		var m dto.Metric
		ts.srv.reqs.WithLabelValues(route, code).Write(&m)
		return m.GetCounter().GetValue()
	}
	handled := func(route string) float64 { return answered(route, "400") + answered(route, "500") }
	deadline := time.Now().Add(30 * time.Second)
	for handled("GET /v1/runs/{run}/head") < 10 || handled("POST /v1/append") < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("head: %v, append: %v requests answered, want 10 each", handled("GET /v1/runs/{run}/head"), handled("POST /v1/append"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := logs.Count(slog.LevelError); n != 0 {
		t.Fatalf("%d ERROR records for 20 requests their clients abandoned, want 0", n)
	}
	// Counted as the client's failures, not the server's: a 5xx rate an
	// alert watches is not the client's to raise.
	if n := answered("GET /v1/runs/{run}/head", "500"); n != 0 {
		t.Fatalf("%v abandoned requests counted as 500", n)
	}
	if status, _, _ := ts.do("GET", "/v1/runs/"+sh.failing.String()+"/head", ""); status != 500 {
		t.Fatalf("a store failure: status %d, want 500", status)
	}
	if n := logs.Count(slog.LevelError); n != 1 {
		t.Fatalf("%d ERROR records for one store failure, want 1", n)
	}
}
