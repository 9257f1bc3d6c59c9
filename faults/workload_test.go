package faults

import (
	"context"
	"fmt"
	"strings"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// runOnce leases a fresh run through c, appends batches of size records
// (each padded to pad bytes), concludes and seals it, and releases it,
// noting every acknowledgement in got. It returns the first error, after
// which the run is left as it stands.
func runOnce(ctx context.Context, c *api.Client, got acks, batches, size, pad int) error {
	return runNoting(ctx, c, got, batches, size, pad, func(store.RunID) {})
}

// runOnceNoting is one run of one batch of two small records, telling
// tried its id before anything is sent.
func runOnceNoting(ctx context.Context, srv *served, got acks, tried func(store.RunID)) error {
	return runNoting(ctx, srv.client, got, 1, 2, 64, tried)
}

func runNoting(ctx context.Context, c *api.Client, got acks, batches, size, pad int, tried func(store.RunID)) error {
	run := store.NewRunID()
	tried(run)
	l, err := c.Acquire(ctx, run, "faults", 3600e9)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	p := strings.Repeat("p", pad)
	for i := range batches {
		var b strings.Builder
		for j := range size {
			fmt.Fprintf(&b, `{"run":"%s","kind":"Step","i":%d,"j":%d,"pad":"%s"}`+"\n", run, i, j, p)
		}
		a, err := c.Append(ctx, l.Epoch, []byte(b.String()))
		if err != nil {
			return fmt.Errorf("append: %w", err)
		}
		got.appended(a.Records)
	}
	a, err := c.Append(ctx, l.Epoch, []byte(fmt.Sprintf(`{"run":"%s","kind":"RunConcluded","outcome":"succeeded"}`+"\n", run)))
	if err != nil {
		return fmt.Errorf("conclude: %w", err)
	}
	got.appended(a.Records)
	s, err := c.Seal(ctx, run, l.Epoch, "succeeded")
	if err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	got.Seal(run, s.Leaf)
	if err := c.Release(ctx, run, l.Epoch); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}
