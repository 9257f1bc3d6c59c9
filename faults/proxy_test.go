package faults

import (
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
)

// The ways a faultyWitness misbehaves.
const (
	pass    = iota // relay to the real witness
	down           // not listening: connections are refused
	hang           // hold every request until the client gives up
	slow           // relay after a delay
	garbage        // answer 200 and 409 with bytes that mean nothing
)

// faultyWitness stands between the publisher and a real witness on a
// fixed address, relaying or misbehaving as told, and notes when each
// request arrived.
type faultyWitness struct {
	t      *testing.T
	addr   string
	relay  *httputil.ReverseProxy
	mu     sync.Mutex
	mode   int
	delay  time.Duration
	srv    *http.Server
	seen   []time.Time
	served int
}

func newFaultyWitness(t *testing.T, target string) *faultyWitness {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyWitness{t: t, addr: "127.0.0.1:0", relay: httputil.NewSingleHostReverseProxy(u), delay: time.Second}
	f.listen()
	t.Cleanup(func() { f.set(down) })
	return f
}

func (f *faultyWitness) listen() {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve)}
	go f.srv.Serve(ln)
}

// set changes the mode; down closes the listener and every connection,
// and leaving down listens again on the same address.
func (f *faultyWitness) set(mode int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.mode
	f.mode = mode
	f.seen = nil
	switch {
	case mode == down && was != down:
		f.srv.Close()
	case mode != down && was == down:
		f.listen()
	}
}

// requests returns when each request since the last set arrived.
func (f *faultyWitness) requests() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.seen...)
}

func (f *faultyWitness) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode, delay := f.mode, f.delay
	f.seen = append(f.seen, time.Now())
	f.served++
	n := f.served
	f.mu.Unlock()
	switch mode {
	case hang:
		<-r.Context().Done()
		return
	case slow:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	case garbage:
		io.Copy(io.Discard, r.Body)
		if n%2 == 0 {
			w.Header().Set("Content-Type", "text/x.tlog.size")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, "many\n")
			return
		}
		io.WriteString(w, "\u2014 w1.example AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n")
		return
	}
	f.relay.ServeHTTP(w, r)
}
