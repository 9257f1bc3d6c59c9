package storetest

import (
	"context"
	"sync"

	"github.com/runseal/runseal/store"
)

// ReadTally counts what a test's wrapper of a store was asked to read: the
// stored bytes of the records the store answered, and the byte bounds of
// its ReadStored calls. It lets a test assert what a reader requested of
// the store, which the code controls, rather than the memory it used.
type ReadTally struct {
	mu       sync.Mutex
	received int
	asked    []int
}

// Count adds the stored bytes of recs, as a read answered them.
func (c *ReadTally) Count(recs []store.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		c.received += len(r.Raw)
	}
}

// Asked notes a ReadStored's byte bound.
func (c *ReadTally) Asked(maxBytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, maxBytes)
}

// Take returns what was counted since the last Take, and starts again.
func (c *ReadTally) Take() (received int, asked []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	received, asked = c.received, c.asked
	c.received, c.asked = 0, nil
	return received, asked
}

// Gate holds a test's reads in progress: Hold announces on Entered that a
// read began, then waits for one send on Release (or its close, which lets
// every read go) or the read's context, so a test can keep a request in
// progress for as long as it likes and know, by an event, that it is.
type Gate struct {
	Entered chan struct{}
	Release chan struct{}
}

// NewGate returns a Gate whose Entered holds up to n announcements.
func NewGate(n int) *Gate {
	return &Gate{Entered: make(chan struct{}, n), Release: make(chan struct{})}
}

// Hold announces a read and waits to be let go; ctx's error if it ends
// first.
func (g *Gate) Hold(ctx context.Context) error {
	g.Entered <- struct{}{}
	select {
	case <-g.Release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
