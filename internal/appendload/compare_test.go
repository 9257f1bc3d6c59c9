package appendload

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestCompare_RoundsAlternateWhoGoesFirst: a peer always measured second
// would always meet the machine's later load and the subject's leftovers
// (the bench was unfair that way once). Two stand-in logs record which
// of them each request reached; the runs, collapsed to their order, must
// be subject, peer | peer, subject | the two open loops.
func TestCompare_RoundsAlternateWhoGoesFirst(t *testing.T) {
	var mu sync.Mutex
	var order []string
	log := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			mu.Lock()
			if len(order) == 0 || order[len(order)-1] != name {
				order = append(order, name)
			}
			mu.Unlock()
			io.WriteString(w, "1")
		}))
	}
	s, p := log("subject"), log("peer")
	defer s.Close()
	defer p.Close()
	cfg := func(url string) Config {
		return Config{AddURL: url, Clients: 2, Duration: 30 * time.Millisecond, Payload: 10}
	}
	loads := 0
	c, err := Compare(context.Background(), cfg(s.URL), cfg(p.URL), 2, func() float64 { loads++; return float64(loads) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"subject", "peer", "subject", "peer"}
	if !slices.Equal(order, want) {
		t.Fatalf("runs reached the logs in the order %v, want %v (round 2 peer first, then the open loops)", order, want)
	}
	if len(c.Rounds) != 2 || c.Rounds[0].PeerFirst || !c.Rounds[1].PeerFirst || c.Rounds[0].Load != 1 || c.Rounds[1].Load != 2 {
		t.Fatalf("rounds %+v", c.Rounds)
	}
	for _, rd := range c.Rounds {
		if rd.Journal <= 0 || rd.Peer <= 0 {
			t.Fatalf("round without both rates: %+v", rd)
		}
	}
	if c.Max.Done == 0 || c.PeerMax.Done == 0 || c.Open.Done == 0 || c.PeerOpen.Done == 0 || c.RoundRatio() <= 0 {
		t.Fatalf("comparison %+v, ratio %v", c, c.RoundRatio())
	}

	// Without a peer only the subject runs, and there is no ratio.
	order = nil
	c, err = Compare(context.Background(), cfg(s.URL), Config{}, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"subject"}) || c.PeerMax.Done != 0 || c.RoundRatio() != 0 {
		t.Fatalf("no peer: order %v, comparison %+v", order, c)
	}
}

func TestMedian(t *testing.T) {
	r := func(x float64) Result { return Result{Throughput: x} }
	for _, tc := range []struct {
		in   []Result
		want float64
	}{
		{nil, 0},
		{[]Result{r(5)}, 5},
		{[]Result{r(9), r(1), r(5)}, 5},
		{[]Result{r(4), r(1), r(3), r(2)}, 3}, // the upper of an even count
	} {
		if got := Median(tc.in).Throughput; got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
