package main

import (
	"context"
	"fmt"
	"time"

	"github.com/runseal/runseal/store/postgres"
	"github.com/runseal/runseal/store/sqlite"
)

// warmReport is what a store's warm at open did, whichever the backend:
// how it read the proofs' pages (empty: nothing to read), how many, how
// long it took and why it stopped short if it did.
type warmReport struct {
	method string
	pages  int64 // -1: the method does not count them
	took   time.Duration
	err    error
}

// warmer is a store that reads its proofs' pages in after it opens
// (postgres.Store, sqlite.Store); serve --wait-warm waits for it before it
// listens.
type warmer struct {
	tenant string
	wait   func(ctx context.Context) (warmReport, error)
}

// warmers returns the stores that warm. A PostgreSQL tenant warms its own
// part of the log; the views of one journal file share the file's warm,
// which the first of them (the one opened) stands for.
func warmers(stores []journalStore) []warmer {
	var out []warmer
	file := false
	for _, s := range stores {
		switch s := s.(type) {
		case *postgres.Store:
			out = append(out, warmer{s.Tenant(), func(ctx context.Context) (warmReport, error) {
				r, err := s.WaitWarm(ctx)
				return warmReport{r.Method, r.Pages, r.Took, r.Err}, err
			}})
		case *sqlite.Store:
			if file {
				continue
			}
			file = true
			out = append(out, warmer{s.Tenant(), func(ctx context.Context) (warmReport, error) {
				r, err := s.WaitWarm(ctx)
				return warmReport{r.Method, r.Pages, r.Took, r.Err}, err
			}})
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
		rep, err := w.wait(ctx)
		if err != nil {
			return fmt.Errorf("tenant %s: waiting for the proofs' pages: %w", w.tenant, err)
		}
		how := rep.method
		if how == "" {
			how = "nothing to read"
		}
		if rep.err != nil {
			fmt.Fprintf(a.stderr, "journal: tenant %s: warming stopped short after %s (%v); proofs read the rest as they need it\n", w.tenant, rep.took.Round(time.Millisecond), rep.err)
			continue
		}
		if rep.pages >= 0 {
			how += fmt.Sprintf(", %d pages", rep.pages)
		}
		fmt.Fprintf(a.stderr, "journal: tenant %s: proofs' pages warmed in %s (%s)\n", w.tenant, rep.took.Round(time.Millisecond), how)
	}
	a.log.Info("serve: proofs warm", "tenants", len(warms), "took", time.Since(start))
	return nil
}
