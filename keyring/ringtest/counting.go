package ringtest

import (
	"context"
	"sync/atomic"

	"github.com/runseal/runseal/keyring"
)

// Counting is a Ring that counts the data keys it unwraps: every sealed
// field a reader opens costs one, so a test can assert that a read opened
// nothing.
type Counting struct {
	keyring.Ring
	unwraps atomic.Int64
}

// Unwrap counts, then unwraps with the Ring it wraps.
func (c *Counting) Unwrap(ctx context.Context, scope string, wrapped []byte) ([]byte, error) {
	c.unwraps.Add(1)
	return c.Ring.Unwrap(ctx, scope, wrapped)
}

// Unwraps returns the unwraps counted since the last Reset.
func (c *Counting) Unwraps() int64 { return c.unwraps.Load() }

// Reset starts the count again.
func (c *Counting) Reset() { c.unwraps.Store(0) }
