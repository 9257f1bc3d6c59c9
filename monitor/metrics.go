package monitor

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Metrics counts a Follower's results and serves them in the Prometheus
// text exposition format, written by hand: four series do not justify
// pulling a client library and its dependencies into an auditor's binary.
// It is safe for concurrent use.
type Metrics struct {
	mu          sync.Mutex
	checks      map[Outcome]uint64
	size        uint64
	lastCheck   time.Time
	lastSuccess time.Time
	forks       uint64
}

// NewMetrics returns metrics with nothing counted.
func NewMetrics() *Metrics { return &Metrics{checks: map[Outcome]uint64{}} }

// Observe counts one result, checked at now.
func (m *Metrics) Observe(res Result, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checks[res.Outcome]++
	m.lastCheck = now
	switch res.Outcome.Class() {
	case Consistent:
		m.lastSuccess, m.size = now, res.Size
	case Forked:
		m.forks++
	}
}

// ServeHTTP writes the metrics.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintln(w, "# HELP runseal_monitor_checks_total Checks of the log, by result.")
	fmt.Fprintln(w, "# TYPE runseal_monitor_checks_total counter")
	results := slices.Clone(Outcomes)
	for r := range m.checks {
		if !slices.Contains(results, r) {
			results = append(results, r)
		}
	}
	for _, r := range results {
		fmt.Fprintf(w, "runseal_monitor_checks_total{result=%q} %d\n", r, m.checks[r])
	}
	fmt.Fprintln(w, "# HELP runseal_monitor_verified_size Tree size of the last checkpoint verified consistent.")
	fmt.Fprintln(w, "# TYPE runseal_monitor_verified_size gauge")
	fmt.Fprintf(w, "runseal_monitor_verified_size %d\n", m.size)
	fmt.Fprintln(w, "# HELP runseal_monitor_last_check_timestamp_seconds When the last check ran.")
	fmt.Fprintln(w, "# TYPE runseal_monitor_last_check_timestamp_seconds gauge")
	fmt.Fprintf(w, "runseal_monitor_last_check_timestamp_seconds %d\n", unixSeconds(m.lastCheck))
	fmt.Fprintln(w, "# HELP runseal_monitor_last_success_timestamp_seconds When a check last ended consistent.")
	fmt.Fprintln(w, "# TYPE runseal_monitor_last_success_timestamp_seconds gauge")
	fmt.Fprintf(w, "runseal_monitor_last_success_timestamp_seconds %d\n", unixSeconds(m.lastSuccess))
	fmt.Fprintln(w, "# HELP runseal_monitor_forks_total Forks detected (evidence written).")
	fmt.Fprintln(w, "# TYPE runseal_monitor_forks_total counter")
	fmt.Fprintf(w, "runseal_monitor_forks_total %d\n", m.forks)
}

func unixSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
