package main

import (
	"context"
	"fmt"
	"time"

	"github.com/runseal/runseal/store/postgres"
)

// warmer is a store that reads its proofs' pages in after it opens
// (postgres.Store); serve --wait-warm waits for it before it listens.
type warmer interface {
	Tenant() string
	WaitWarm(ctx context.Context) (postgres.WarmReport, error)
}

// warmers returns the stores that warm; a journal file has nothing to warm.
func warmers(stores []journalStore) []warmer {
	var out []warmer
	for _, s := range stores {
		if w, ok := s.(warmer); ok {
			out = append(out, w)
		}
	}
	return out
}

// waitWarm waits for every store's warm, saying so on stderr, so that a
// server started with --wait-warm answers its first proofs as fast as its
// later ones. A warm that stopped short is reported, not fatal: proofs then
// read the rest as they need it.
func (a *app) waitWarm(ctx context.Context, warms []warmer) error {
	if len(warms) == 0 {
		return nil
	}
	start := time.Now()
	fmt.Fprintf(a.stderr, "journal: reading in the proofs' pages before listening (--wait-warm)\n")
	for _, w := range warms {
		rep, err := w.WaitWarm(ctx)
		if err != nil {
			return fmt.Errorf("tenant %s: waiting for the proofs' pages: %w", w.Tenant(), err)
		}
		how := rep.Method
		if how == "" {
			how = "nothing to read"
		}
		if rep.Err != nil {
			fmt.Fprintf(a.stderr, "journal: tenant %s: warming stopped short after %s (%v); proofs read the rest as they need it\n", w.Tenant(), rep.Took.Round(time.Millisecond), rep.Err)
			continue
		}
		fmt.Fprintf(a.stderr, "journal: tenant %s: proofs' pages warmed in %s (%s, %d pages)\n", w.Tenant(), rep.Took.Round(time.Millisecond), how, rep.Pages)
	}
	a.log.Info("serve: proofs warm", "tenants", len(warms), "took", time.Since(start))
	return nil
}
