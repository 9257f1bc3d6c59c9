package main

import (
	"io"
	"log/slog"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/runseal/runseal/disclosure"
)

// restoreProgress shows a restore's progress: on a terminal, a bar per
// phase with its rate and the time left (bytes while checking, records
// while appending, leaves while sealing); otherwise a log line at most
// every 10 seconds, and one when a phase ends.
type restoreProgress struct {
	w     io.Writer
	log   *slog.Logger
	tty   bool
	phase string
	bar   *progressbar.ProgressBar
	last  time.Time
	start time.Time
	prev  disclosure.RestoreProgress
}

func newRestoreProgress(w io.Writer, log *slog.Logger) *restoreProgress {
	return &restoreProgress{w: w, log: log, tty: isTerminal(w)}
}

// update is disclosure.RestoreOptions.Progress.
func (p *restoreProgress) update(u disclosure.RestoreProgress) {
	if u.Phase != p.phase {
		p.end()
		p.phase, p.start = u.Phase, time.Now()
		if p.tty {
			desc := map[string]string{disclosure.PhaseChecking: "checking", disclosure.PhaseAppending: "appending records", disclosure.PhaseSealing: "sealing runs"}[u.Phase]
			opts := []progressbar.Option{
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(200 * time.Millisecond),
				progressbar.OptionClearOnFinish(),
			}
			if u.Phase == disclosure.PhaseChecking {
				opts = append(opts, progressbar.OptionShowBytes(true))
			} else {
				opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(map[string]string{disclosure.PhaseAppending: "records", disclosure.PhaseSealing: "leaves"}[u.Phase]))
			}
			total := int64(u.Total)
			if total == 0 {
				total = -1
			}
			p.bar = progressbar.NewOptions64(total, opts...)
		}
	}
	p.prev = u
	if p.bar != nil {
		_ = p.bar.Set64(int64(u.Done))
		return
	}
	if time.Since(p.last) >= 10*time.Second {
		p.last = time.Now()
		p.log.Info("restore progress", "phase", u.Phase, "done", u.Done, "total", u.Total, "per_second", p.rate(u.Done))
	}
}

func (p *restoreProgress) rate(done uint64) float64 {
	s := time.Since(p.start).Seconds()
	if s <= 0 {
		return 0
	}
	return float64(done) / s
}

// end closes the current phase's bar or logs its end.
func (p *restoreProgress) end() {
	if p.phase == "" {
		return
	}
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
	p.log.Info("restore phase done", "phase", p.phase, "done", p.prev.Done, "seconds", time.Since(p.start).Seconds(), "per_second", p.rate(p.prev.Done))
}
