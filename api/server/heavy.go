package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// DefaultHeavyReadMemory is the memory the heavy reads of one server may
// hold at once unless Config.MaxHeavyReads says otherwise: the default
// count of slots is this over what one heavy read may hold (the records
// bound plus one record).
const DefaultHeavyReadMemory = 64 << 20

// DefaultHeavyReadWait is how long a heavy read waits for a slot before it
// is answered 503, unless Config.HeavyReadWait says otherwise.
const DefaultHeavyReadWait = 2 * time.Second

// heavyRetryAfter is the Retry-After of a 503 for want of a slot, in
// seconds: slots free as fast as pages are written.
const heavyRetryAfter = "1"

// heavyReads is the server's count of heavy reads in progress: requests
// that may each hold MiBs (a page of records, a Route marked Heavy). One
// client cannot hold more than its share, and all of them together hold
// at most slots × (records bound + one record) of records.
type heavyReads struct {
	slots chan struct{}
	wait  time.Duration // < 0: none
}

func newHeavyReads(cfg Config, maxBytes int) *heavyReads {
	n := cfg.MaxHeavyReads
	if n <= 0 {
		n = max(1, DefaultHeavyReadMemory/(maxBytes+store.MaxRecordBytes))
	}
	wait := cfg.HeavyReadWait
	if wait == 0 {
		wait = DefaultHeavyReadWait
	}
	return &heavyReads{slots: make(chan struct{}, n), wait: wait}
}

// acquire takes a slot, waiting at most h.wait and never past ctx; false
// when none came free in time.
func (h *heavyReads) acquire(ctx context.Context) bool {
	select {
	case h.slots <- struct{}{}:
		return true
	default:
	}
	if h.wait < 0 {
		return false
	}
	t := time.NewTimer(h.wait)
	defer t.Stop()
	select {
	case h.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (h *heavyReads) release() { <-h.slots }

// HeavyRead runs fn in one of the server's heavy-read slots, for a handler
// outside the API's routes that may hold MiBs (the console's Run page), so
// that it and the API's records pages and Heavy routes count against one
// bound. Without a slot in time it sets Retry-After on w and returns the
// 503 *api.Error naming the limit, and fn does not run; otherwise it
// returns fn's error. Call it after authenticating, so that only an
// authenticated request takes or waits for a slot.
func (s *Server) HeavyRead(w http.ResponseWriter, r *http.Request, fn func() error) error {
	if !s.heavyReads.acquire(r.Context()) {
		w.Header().Set("Retry-After", heavyRetryAfter)
		return &api.Error{Status: http.StatusServiceUnavailable,
			Message: fmt.Sprintf("the server is answering its limit of %d large reads at once; try again shortly", cap(s.heavyReads.slots))}
	}
	defer s.heavyReads.release()
	return fn()
}

// heavy runs fn in a heavy-read slot (HeavyRead).
func (s *Server) heavy(fn HandlerFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, t *Tenant) error {
		return s.HeavyRead(w, r, func() error { return fn(w, r, t) })
	}
}
