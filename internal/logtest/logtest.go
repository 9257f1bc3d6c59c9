// Package logtest records what a component logs, so a test can count
// records by level (a client must not be able to write ERROR lines) and
// wait for one it expects.
package logtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Recorder is a slog.Handler that keeps every record, at every level.
type Recorder struct {
	mu      sync.Mutex
	recs    []slog.Record
	changed chan struct{} // closed and replaced on every record
}

// New returns an empty Recorder and a logger writing to it.
func New() (*Recorder, *slog.Logger) {
	r := &Recorder{changed: make(chan struct{})}
	return r, slog.New(r)
}

// Enabled implements slog.Handler: every level is kept.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// WithAttrs implements slog.Handler; the attributes are not kept.
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup implements slog.Handler; the group is not kept.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// Count returns how many records at level were logged.
func (r *Recorder) Count(level slog.Level) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level == level {
			n++
		}
	}
	return n
}

// Wait returns the first record at level whose message contains msg,
// waiting for it to be logged; the test fails if none is within 30 s.
func (r *Recorder) Wait(t testing.TB, level slog.Level, msg string) slog.Record {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		for _, rec := range r.recs {
			if rec.Level == level && strings.Contains(rec.Message, msg) {
				r.mu.Unlock()
				return rec
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s record %q was logged", level, msg)
		}
	}
}
