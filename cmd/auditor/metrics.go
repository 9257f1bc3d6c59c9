package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// metrics are the monitor's Prometheus metrics, written in the text
// exposition format by hand: four series do not justify pulling a client
// library and its dependencies into an auditor's binary.
type metrics struct {
	mu          sync.Mutex
	checks      map[string]uint64 // by result
	size        uint64
	lastCheck   time.Time
	lastSuccess time.Time
	forks       uint64
}

func newMetrics() *metrics { return &metrics{checks: map[string]uint64{}} }

func (m *metrics) observe(res checkResult, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checks[res.Result]++
	m.lastCheck = now
	if res.Code == exitSound {
		m.lastSuccess, m.size = now, res.Size
	}
	if res.Code == exitFork {
		m.forks++
	}
}

func (m *metrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.mu.Lock()
		defer m.mu.Unlock()
		fmt.Fprintln(w, "# HELP runseal_monitor_checks_total Checks of the log, by result.")
		fmt.Fprintln(w, "# TYPE runseal_monitor_checks_total counter")
		results := []string{"started", "advanced", "unchanged", "invalid", "origin_changed", "rollback", "fork", "bad_proof", "unverifiable"}
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
	})
	return mux
}

func unixSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func jsonIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
