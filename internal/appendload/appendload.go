// Package appendload drives a journal server's append API (spec/http.md)
// the way many workers would: C clients, each holding the lease of its own
// run on its own connection, each request one small record. With AddURL
// it drives a log's plain add endpoint instead (Tessera's POST /add), with
// the same schedule and the same record bytes, so the two can be compared
// in one run.
//
// The load is open loop when a Rate is given: requests are due on a fixed
// schedule, and a request's latency is measured from when it was due, not
// from when it was sent, so a server that stalls is charged for every
// request it held up (no coordinated omission). A client that falls behind
// sends its overdue requests at once, back to back, and answers that
// arrive after the run's end still count.
//
// Both kinds of server are driven alike, so that the client's own CPU (it
// shares the machine with the server) weighs the same on each: every
// client opens its connection and sends one untimed request before the
// clock starts (the journal's lease and first record; a plain add for a
// log), and each timed request is one POST of the same record bytes on a
// kept-alive connection, whose answer is read whole and checked for its
// status (and, for the journal, that it acknowledges a record) but not
// decoded further.
package appendload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// Config is one load run.
type Config struct {
	// BaseURL and Token reach the server; the token needs the writer role.
	BaseURL, Token string
	// Clients is how many concurrent clients, each on its own run.
	Clients int
	// Duration is how long requests are scheduled for.
	Duration time.Duration
	// Rate is the offered load in requests per second over all clients;
	// zero runs closed loop (each client sends as soon as its previous
	// answer came), which measures the most the server takes.
	Rate float64
	// Payload is the bytes of text in each record (a record is about 100
	// bytes more).
	Payload int
	// AddURL, when set, is a URL to POST each record to as the whole body,
	// with no token and no lease (a Tessera log's POST /add); any 200
	// answer counts. BaseURL and Token are then unused.
	AddURL string
}

// Result is what one load run measured.
type Result struct {
	Clients    int           `json:"clients"`
	Offered    float64       `json:"offered_per_sec,omitempty"` // zero: closed loop
	Done       int           `json:"done"`
	Failed     int           `json:"failed"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	Throughput float64       `json:"per_sec"`
	P50        time.Duration `json:"p50_ns"`
	P90        time.Duration `json:"p90_ns"`
	P99        time.Duration `json:"p99_ns"`
	P999       time.Duration `json:"p999_ns"`
	Max        time.Duration `json:"max_ns"`
	FirstError string        `json:"first_error,omitempty"`
}

// Run sets up every client's lease and first record, then runs the load.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Clients < 1 || cfg.Duration <= 0 || cfg.Rate < 0 {
		return Result{}, errors.New("appendload: need at least one client, a duration, and a rate not below zero")
	}
	tr := &http.Transport{MaxIdleConns: cfg.Clients, MaxIdleConnsPerHost: cfg.Clients, MaxConnsPerHost: cfg.Clients, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	var c *api.Client
	if cfg.AddURL == "" {
		var err error
		if c, err = api.NewClient(cfg.BaseURL, api.ClientOptions{Token: cfg.Token, HTTPClient: hc, UserAgent: "runseal-appendload"}); err != nil {
			return Result{}, err
		}
	}
	text := strings.Repeat("x", cfg.Payload)
	workers := make([]*worker, cfg.Clients)
	var setup sync.WaitGroup
	setupErr := make(chan error, cfg.Clients)
	for i := range workers {
		w := &worker{hc: hc, run: store.NewRunID(), token: cfg.Token}
		w.line = []byte(`{"run":"` + w.run.String() + `","kind":"Note","text":"` + text + `"}` + "\n")
		w.count = w.line[len(w.line)-3-len(text) : len(w.line)-3][:min(len(text), 16)]
		workers[i] = w
		setup.Go(func() {
			var err error
			if c == nil {
				// A plain add needs no lease; one untimed add opens the
				// connection, as the journal's setup does.
				w.url = cfg.AddURL
				err = w.send(ctx)
			} else {
				err = w.start(ctx, c, cfg.BaseURL, i)
			}
			if err != nil {
				setupErr <- err
			}
		})
	}
	setup.Wait()
	close(setupErr)
	if err := <-setupErr; err != nil {
		return Result{}, fmt.Errorf("appendload: setting up a client: %w", err)
	}

	start := time.Now()
	end := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i, w := range workers {
		var interval, offset time.Duration
		if cfg.Rate > 0 {
			interval = time.Duration(float64(cfg.Clients) / cfg.Rate * float64(time.Second))
			offset = interval * time.Duration(i) / time.Duration(cfg.Clients)
		}
		wg.Go(func() { w.loop(ctx, start.Add(offset), end, interval) })
	}
	wg.Wait()
	res := Result{Clients: cfg.Clients, Offered: cfg.Rate, Elapsed: time.Since(start)}
	var lat []time.Duration
	for _, w := range workers {
		lat = append(lat, w.lat...)
		res.Failed += w.failed
		if res.FirstError == "" && w.err != nil {
			res.FirstError = w.err.Error()
		}
	}
	res.Done = len(lat)
	res.Throughput = float64(res.Done) / res.Elapsed.Seconds()
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	res.P50, res.P90, res.P99, res.P999 = q(0.50), q(0.90), q(0.99), q(0.999)
	if len(lat) > 0 {
		res.Max = lat[len(lat)-1]
	}
	return res, nil
}

// worker is one client: its run, where it posts, and what it measured.
type worker struct {
	hc     *http.Client
	url    string // POST each record here: the journal's append with the epoch, or addURL
	token  string // the journal's bearer token; empty for a plain add
	run    store.RunID
	line   []byte
	count  []byte // the start of line's text, rewritten with a request counter
	sent   uint64
	lat    []time.Duration
	failed int
	err    error
}

// start takes the lease of w's run and appends its first record through
// the journal's client, then fixes the URL the timed appends post to.
func (w *worker) start(ctx context.Context, c *api.Client, base string, i int) error {
	l, err := c.Acquire(ctx, w.run, fmt.Sprintf("appendload-%d", i), time.Hour)
	if err != nil {
		return err
	}
	if _, err = c.Append(ctx, l.Epoch, []byte(`{"run":"`+w.run.String()+`","kind":"RunAdmitted","source":"appendload"}`+"\n")); err != nil {
		return err
	}
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	u = u.JoinPath("v1/append")
	q := u.Query()
	q.Set("epoch", strconv.FormatUint(uint64(l.Epoch), 10))
	u.RawQuery = q.Encode()
	w.url = u.String()
	return nil
}

// loop sends one append per interval from first until end (back to back
// when interval is zero), measuring each from when it was due.
func (w *worker) loop(ctx context.Context, first, end time.Time, interval time.Duration) {
	due := first
	for ctx.Err() == nil {
		now := time.Now()
		if interval > 0 {
			if !due.Before(end) {
				return
			}
			if d := due.Sub(now); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		} else {
			if !now.Before(end) {
				return
			}
			due = now
		}
		err := w.send(ctx)
		if err != nil {
			w.failed++
			if w.err == nil {
				w.err = err
			}
		} else {
			w.lat = append(w.lat, time.Since(due))
		}
		due = due.Add(interval)
	}
}

// send makes one request: a POST of w's record to the journal's append
// (spec/http.md) or to a log's plain add. The journal's answer must
// acknowledge a record; a log's any 200.
//
// Every record differs from the worker's others (its text starts with a
// request counter): a log that drops duplicate entries, as Tessera's
// antispam does, must still do the work of each one.
func (w *worker) send(ctx context.Context) error {
	w.sent++
	for i, n := len(w.count)-1, w.sent; i >= 0; i, n = i-1, n/10 {
		w.count[i] = byte('0' + n%10)
	}
	line := slices.Clone(w.line) // a transport may still hold the last body
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(line))
	if err != nil {
		return err
	}
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %.200s", api.Redact(w.url), resp.Status, b)
	}
	if w.token != "" && !bytes.Contains(b, []byte(`"seq":`)) {
		return fmt.Errorf("POST %s: the answer acknowledges no record: %.200s", api.Redact(w.url), b)
	}
	return nil
}
