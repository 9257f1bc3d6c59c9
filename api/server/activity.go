package server

import (
	"bytes"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/runseal/runseal/store"
)

// A Meter counts the appends and seals the API commits, per tenant and per
// minute, over the last day, with their latency: what the console's
// Activity page plots and GET /v1/activity answers.
//
// It counts what this server committed since it started: a shared store's
// other writers, and the CLI writing the same file, are not seen, and a
// restart starts from nothing. The journal's records carry no time of
// their own that could be counted instead. Memory is bounded: a fixed ring
// of MeterMinutes slots per served tenant (about 400 KiB each), and only a
// tenant the API answered 2xx for gets one.
type Meter struct {
	now   func() time.Time
	start time.Time
	mu    sync.Mutex
	rings map[string]*meterRing
}

// MeterMinutes is how many minutes a Meter keeps: one day.
const MeterMinutes = 24 * 60

// latBuckets are latency buckets whose upper bounds grow by sqrt(2) from
// latBase; the last one is unbounded. Percentiles are answered as the
// upper bound of the bucket they fall in, so within a factor of 1.41.
const (
	latBuckets = 32
	latBase    = 100 * time.Microsecond
)

type meterMinute struct {
	minute  int64 // the Unix minute this slot counts; another value means empty
	appends uint32
	records uint32
	seals   uint32
	appLat  [latBuckets]uint32
	sealLat [latBuckets]uint32
}

type meterRing [MeterMinutes]meterMinute

// NewMeter returns an empty Meter; now is its clock (time.Now when nil).
func NewMeter(now func() time.Time) *Meter {
	if now == nil {
		now = time.Now
	}
	return &Meter{now: now, start: now(), rings: map[string]*meterRing{}}
}

// The API routes a Meter counts, as http.ServeMux patterns.
const (
	appendPattern = "POST /v1/append"
	sealPattern   = "POST /v1/runs/{run}/seal"
)

// Observe wraps the API's handler (a *Server) and counts each append and
// seal it answers with 2xx. The route is the pattern the Server's mux
// matched (http.Request.Pattern), so a path is never parsed twice. The
// records of an append are counted in its answer, whose "line" members
// are one per record (spec/http.md section 4).
func (m *Meter) Observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		start := m.now()
		cw := &countingWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(cw, r)
		if cw.code/100 != 2 {
			return
		}
		var seal bool
		switch r.Pattern {
		case appendPattern:
		case sealPattern:
			seal = true
		default:
			return
		}
		tenant := queryValue(r.URL.RawQuery, "tenant") // as authorize read it
		if tenant == "" {
			tenant = store.DefaultTenant
		}
		m.add(tenant, seal, cw.lines, m.now().Sub(start))
	})
}

// countingWriter passes an answer on and counts its records' "line"
// members; only an append's answer has them.
type countingWriter struct {
	http.ResponseWriter
	code  int
	lines int
	tail  [8]byte // the last ntail bytes written, for a member name cut between writes
	ntail int
}

func (w *countingWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

var lineMember = []byte(`"line":`)

func (w *countingWriter) Write(p []byte) (int, error) {
	// A name cut between two writes is found in the tail of the first
	// joined to the head of the second; the head alone is too short to
	// hold one, so nothing is counted twice.
	// The tail is kept in the writer, not allocated: this runs on every
	// append's answer.
	const n = len(`"line":`) - 1 // len(lineMember) - 1
	var buf [2 * n]byte
	j := append(append(buf[:0], w.tail[:w.ntail]...), p[:min(len(p), n)]...)
	w.lines += bytes.Count(j, lineMember) + bytes.Count(p, lineMember)
	if len(p) < n {
		// j is the old tail and all of p.
		w.ntail = copy(w.tail[:], j[max(0, len(j)-n):])
	} else {
		w.ntail = copy(w.tail[:], p[len(p)-n:])
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes on to the connection.
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func latBucket(d time.Duration) int {
	if d <= latBase {
		return 0
	}
	i := int(math.Ceil(2 * math.Log2(float64(d)/float64(latBase))))
	return min(i, latBuckets-1)
}

// latBound is the upper bound of bucket i; +Inf for the last.
func latBound(i int) time.Duration {
	if i >= latBuckets-1 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(float64(latBase) * math.Pow(2, float64(i)/2))
}

func (m *Meter) add(tenant string, seal bool, records int, took time.Duration) {
	minute := m.now().Unix() / 60
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rings[tenant]
	if r == nil {
		r = new(meterRing)
		m.rings[tenant] = r
	}
	s := &r[minute%MeterMinutes]
	if s.minute != minute {
		*s = meterMinute{minute: minute}
	}
	b := latBucket(took)
	if seal {
		s.seals++
		s.sealLat[b]++
		return
	}
	s.appends++
	s.records += uint32(records)
	s.appLat[b]++
}

// ActivityPoint is one step of a series: what was committed in
// [At, At+Step).
type ActivityPoint struct {
	At      time.Time `json:"at"`
	Appends uint64    `json:"appends"` // append requests
	Records uint64    `json:"records"` // records they carried
	Seals   uint64    `json:"seals"`
}

// ActivitySeries is a window of equal steps, oldest first.
type ActivitySeries struct {
	StepSeconds int             `json:"step_seconds"`
	Points      []ActivityPoint `json:"points"`
	// Totals sums the points.
	Totals ActivityPoint `json:"totals"`
	// AppendLatency and SealLatency are over the whole window.
	AppendLatency Latency `json:"append_latency"`
	SealLatency   Latency `json:"seal_latency"`
}

// Latency summarises request latencies, in milliseconds. A percentile is
// the upper bound of the bucket it falls in (buckets grow by sqrt 2 from
// 0.1 ms); -1 means above the last bound (4.6 s). Count 0: no requests.
type Latency struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Activity answers GET /v1/activity: a tenant's last hour by minute and
// last day by ten minutes.
type Activity struct {
	Tenant string         `json:"tenant"`
	Since  time.Time      `json:"since"` // when counting started (the server's start)
	Now    time.Time      `json:"now"`
	Hour   ActivitySeries `json:"hour"`
	Day    ActivitySeries `json:"day"`
}

// Activity returns what the meter counted for tenant.
func (m *Meter) Activity(tenant string) Activity {
	now := m.now()
	cur := now.Unix() / 60
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rings[tenant]
	return Activity{
		Tenant: tenant, Since: m.start.UTC(), Now: now.UTC(),
		Hour: series(r, cur, 60, 1),
		Day:  series(r, cur, MeterMinutes, 10),
	}
}

// series sums the ring's last n minutes up to cur into steps of step
// minutes each.
func series(r *meterRing, cur int64, n, step int) ActivitySeries {
	out := ActivitySeries{StepSeconds: step * 60, Points: make([]ActivityPoint, n/step)}
	var app, seal [latBuckets]uint64
	first := cur - int64(n) + 1
	for i := range out.Points {
		p := &out.Points[i]
		p.At = time.Unix((first+int64(i*step))*60, 0).UTC()
		if r == nil {
			continue
		}
		for k := range step {
			minute := first + int64(i*step+k)
			s := &r[minute%MeterMinutes]
			if s.minute != minute {
				continue
			}
			p.Appends += uint64(s.appends)
			p.Records += uint64(s.records)
			p.Seals += uint64(s.seals)
			for b := range latBuckets {
				app[b] += uint64(s.appLat[b])
				seal[b] += uint64(s.sealLat[b])
			}
		}
		out.Totals.Appends += p.Appends
		out.Totals.Records += p.Records
		out.Totals.Seals += p.Seals
	}
	out.Totals.At = time.Unix(first*60, 0).UTC()
	out.AppendLatency = summarise(app)
	out.SealLatency = summarise(seal)
	return out
}

func summarise(h [latBuckets]uint64) Latency {
	var l Latency
	for _, c := range h {
		l.Count += c
	}
	if l.Count == 0 {
		return l
	}
	ms := func(i int) float64 {
		if i >= latBuckets-1 {
			return -1
		}
		return math.Round(float64(latBound(i))/float64(time.Millisecond)*1000) / 1000
	}
	at := func(q float64) float64 {
		want := uint64(math.Ceil(q * float64(l.Count)))
		var seen uint64
		for i, c := range h {
			seen += c
			if seen >= want {
				return ms(i)
			}
		}
		return ms(latBuckets - 1)
	}
	l.P50, l.P90, l.P99 = at(0.50), at(0.90), at(0.99)
	for i := latBuckets - 1; i >= 0; i-- {
		if h[i] > 0 {
			l.Max = ms(i)
			break
		}
	}
	return l
}
