package witness

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the witness's Prometheus metrics. Per-log series carry an
// origin label only for logs the witness has; requests naming an unknown
// origin, or none that parses, are counted under origin="", so a client
// cannot create series at will. A nil *Metrics records nothing.
type Metrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	size       *prometheus.GaugeVec
	cosignedAt *prometheus.GaugeVec
	evidence   *prometheus.CounterVec
	groupSize  prometheus.Histogram
	commitTime prometheus.Histogram

	// series caches each origin's series of the 200 path (*logSeries by
	// origin), so a cosigned request does not hash its labels four times.
	// It holds only witnessed logs and "", as the labels do.
	series sync.Map
}

// logSeries are one origin's series that every cosigned request updates.
type logSeries struct {
	ok         prometheus.Counter
	duration   prometheus.Observer
	size       prometheus.Gauge
	cosignedAt prometheus.Gauge
}

func (m *Metrics) seriesOf(origin string) *logSeries {
	if v, ok := m.series.Load(origin); ok {
		return v.(*logSeries)
	}
	s := &logSeries{
		ok:         m.requests.WithLabelValues(origin, strconv.Itoa(http.StatusOK)),
		duration:   m.duration.WithLabelValues(origin),
		size:       m.size.WithLabelValues(origin),
		cosignedAt: m.cosignedAt.WithLabelValues(origin),
	}
	v, _ := m.series.LoadOrStore(origin, s)
	return v.(*logSeries)
}

// NewMetrics creates the witness metrics and registers them with reg:
//
//	witness_add_checkpoint_requests_total{origin,code}   requests by HTTP status
//	witness_add_checkpoint_duration_seconds{origin}      request latency
//	witness_log_size{origin}                             latest cosigned size
//	witness_log_cosigned_timestamp_seconds{origin}       time of that cosignature
//	witness_evidence_total{origin,kind}                  refused, validly signed inconsistent checkpoints
//	witness_commit_group_size                            writes per transaction (group commit)
//	witness_commit_duration_seconds                      transaction time, fsync included
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "witness_add_checkpoint_requests_total",
			Help: "add-checkpoint requests by log origin (empty if unknown) and HTTP status code.",
		}, []string{"origin", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "witness_add_checkpoint_duration_seconds",
			Help:    "add-checkpoint latency by log origin (empty if unknown), durable write included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"origin"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "witness_log_size",
			Help: "Tree size of the latest checkpoint cosigned, by log origin.",
		}, []string{"origin"}),
		cosignedAt: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "witness_log_cosigned_timestamp_seconds",
			Help: "Unix time of the latest cosignature, by log origin.",
		}, []string{"origin"}),
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "witness_evidence_total",
			Help: "Validly signed checkpoints refused as inconsistent and kept as evidence, by origin and kind (split_view, bad_proof).",
		}, []string{"origin", "kind"}),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "witness_commit_group_size",
			Help:    "Writes committed together in one transaction and fsync.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "witness_commit_duration_seconds",
			Help:    "Time from the start of a group's transaction to its durable commit.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.size, m.cosignedAt, m.evidence, m.groupSize, m.commitTime} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeRequest(origin string, code int, d time.Duration) {
	if m == nil {
		return
	}
	if code == http.StatusOK {
		s := m.seriesOf(origin)
		s.ok.Inc()
		s.duration.Observe(d.Seconds())
		return
	}
	m.requests.WithLabelValues(origin, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(origin).Observe(d.Seconds())
}

func (m *Metrics) observeCosigned(origin string, size uint64, at time.Time) {
	if m == nil {
		return
	}
	s := m.seriesOf(origin)
	s.size.Set(float64(size))
	s.cosignedAt.Set(float64(at.Unix()))
}

func (m *Metrics) observeEvidence(origin, kind string) {
	if m == nil {
		return
	}
	m.evidence.WithLabelValues(origin, kind).Inc()
}

func (m *Metrics) observeGroup(n int, d time.Duration) {
	if m == nil {
		return
	}
	m.groupSize.Observe(float64(n))
	m.commitTime.Observe(d.Seconds())
}
