package appendload

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// fakeServer answers leases and appends; stallUntil, when set, holds the
// first timed append until then.
type fakeServer struct {
	mu         sync.Mutex
	appends    map[string]int
	stallUntil time.Time
	stalled    bool
}

func (f *fakeServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs/{run}/lease", func(w http.ResponseWriter, r *http.Request) {
		run, _ := store.ParseRunID(r.PathValue("run"))
		json.NewEncoder(w).Encode(store.Lease{Run: run, Owner: "x", Epoch: 1, Expires: time.Now().Add(time.Hour)})
	})
	mux.HandleFunc("POST /v1/append", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.appends[strings.SplitN(string(b), `"`, 5)[3]]++
		stall := !f.stalled && !f.stallUntil.IsZero() && strings.Contains(string(b), `"Note"`)
		if stall {
			f.stalled = true
		}
		until := f.stallUntil
		f.mu.Unlock()
		if stall {
			time.Sleep(time.Until(until))
		}
		json.NewEncoder(w).Encode(api.Appended{Records: []api.Ack{{Line: 1}}})
	})
	return mux
}

func TestRun_ClosedAndOpenLoop(t *testing.T) {
	f := &fakeServer{appends: map[string]int{}}
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	for _, rate := range []float64{0, 200} {
		res, err := Run(context.Background(), Config{BaseURL: srv.URL, Token: "t", Clients: 4, Duration: 100 * time.Millisecond, Rate: rate, Payload: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Done == 0 || res.Failed != 0 || res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 || res.Throughput <= 0 {
			t.Fatalf("rate %v: %+v", rate, res)
		}
		if rate > 0 && res.Done != 20 {
			t.Fatalf("open loop at %v/s for 100 ms: %d requests, want every one due (20)", rate, res.Done)
		}
	}
}

// TestRun_StallIsChargedToEveryRequestDue: a server that stalls one
// request holds up every request the client had due behind it. Measured
// from when each was sent (coordinated omission) only the first would look
// slow; measured from its schedule, most of them are.
func TestRun_StallIsChargedToEveryRequestDue(t *testing.T) {
	const d = 400 * time.Millisecond
	f := &fakeServer{appends: map[string]int{}, stallUntil: time.Now().Add(2 * d)}
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	res, err := Run(context.Background(), Config{BaseURL: srv.URL, Token: "t", Clients: 1, Duration: d, Rate: 50, Payload: 10})
	if err != nil {
		t.Fatal(err)
	}
	// 20 requests are due over d, and the first is held until after d has
	// passed: every one of them completes after d, so at least half of
	// them waited at least d/2 from when they were due.
	if res.Done != 20 || res.P50 < d/2 {
		t.Fatalf("%d done, p50 %v; want 20 and at least %v", res.Done, res.P50, d/2)
	}
}

// TestRun_AddURL drives a plain add endpoint (Tessera's POST /add) on the
// same schedule: every request due is sent, each body is one whole record,
// no lease is asked for, each client opens its connection with one untimed
// add (as the journal's clients do with their lease), and a log that
// refuses fails the run with its answer named.
func TestRun_AddURL(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	refuse := false
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		no := refuse
		mu.Unlock()
		if no {
			http.Error(w, "full", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "7")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	res, err := Run(context.Background(), Config{AddURL: srv.URL + "/add", Clients: 4, Duration: 100 * time.Millisecond, Rate: 200, Payload: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 20 || res.Failed != 0 {
		t.Fatalf("open loop at 200/s for 100 ms: %+v, want 20 done", res)
	}
	mu.Lock()
	if len(bodies) != 24 {
		t.Fatalf("%d adds reached the log, want 20 timed and one untimed opening add per client (24)", len(bodies))
	}
	seen := map[string]bool{}
	for _, b := range bodies {
		var rec map[string]any
		if err := json.Unmarshal([]byte(b), &rec); err != nil || rec["kind"] != "Note" || len(rec["text"].(string)) != 10 {
			t.Fatalf("body %q is not one record with 10 bytes of text", b)
		}
		if seen[b] {
			t.Fatalf("body %q sent twice: a log that drops duplicates would not do its work", b)
		}
		seen[b] = true
	}
	refuse = true
	mu.Unlock()
	// A log that refuses adds fails the run before the clock starts, with
	// its answer named.
	if _, err = Run(context.Background(), Config{AddURL: srv.URL + "/add", Clients: 1, Duration: 50 * time.Millisecond, Rate: 100, Payload: 10}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("refused adds: %v, want an error naming the 503", err)
	}
}

// TestRun_AnswerWithoutAckIsAFailure: the journal's timed appends are not
// decoded, but a 200 whose answer acknowledges no record is not counted
// as an append done (a server, or a proxy before it, answering 200 with
// anything else would otherwise look fast).
func TestRun_AnswerWithoutAckIsAFailure(t *testing.T) {
	f := &fakeServer{appends: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/runs/{run}/lease", f.handler())
	first := map[string]bool{}
	var mu sync.Mutex
	mux.HandleFunc("POST /v1/append", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		setup := !first[string(b[:40])]
		first[string(b[:40])] = true
		mu.Unlock()
		if setup { // the untimed first record goes through the client, which decodes
			json.NewEncoder(w).Encode(api.Appended{Records: []api.Ack{{Line: 1, Seq: 1}}})
			return
		}
		io.WriteString(w, `{"records":[]}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	res, err := Run(context.Background(), Config{BaseURL: srv.URL, Token: "t", Clients: 2, Duration: 50 * time.Millisecond, Rate: 100, Payload: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 0 || res.Failed != 5 || !strings.Contains(res.FirstError, "acknowledges no record") {
		t.Fatalf("%+v, want every timed append failed for want of an ack", res)
	}
}
