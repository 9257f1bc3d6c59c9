package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/runseal/runseal/internal/benchappend"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
)

// eraseBench is the cost of erasing one case of N sealed records ("journal
// bench --sealed"): the key ring's destruction of the scope key, and the
// whole erasure (destruction plus the ScopeErased record, its run concluded
// and sealed into the log). Neither may touch the case's records: every
// run's head is compared before and after.
type eraseBench struct {
	Records int `json:"records"`
	Runs    int `json:"runs"`
	// KeyMicros is keyring.Ring.Erase alone on one case; EraseMicros is
	// sealed.Journal.Erase (the journal erase command's work) on another
	// case of the same size.
	KeyMicros   float64 `json:"key_erase_us"`
	EraseMicros float64 `json:"erase_us"`
	// Untouched: no record of either case changed (every run head equal).
	Untouched bool       `json:"records_untouched"`
	Load      [2]float64 `json:"load"` // 1-minute load average before and after
}

// benchErase writes two cases of n sealed records each (runs of 1000) into
// a fresh journal in dir under ring, then erases one with the ring alone
// and the other through the journal, timing each.
func benchErase(ctx context.Context, dir string, ring keyring.Ring, n int) (*eraseBench, error) {
	path := filepath.Join(dir, "erase.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	defer benchappend.RemoveDB(path)
	defer s.Close()
	j := sealed.New(s, ring, sealed.Options{})
	res := &eraseBench{Records: n, Load: [2]float64{loadAverage(), 0}}
	type sized struct {
		c     store.CaseID
		runs  []store.RunID
		heads []store.Head
	}
	cases := make([]sized, 2)
	for k := range cases {
		cases[k].c = store.NewCaseID()
		for left := n; left > 0; left -= 1000 {
			run := store.NewRunID()
			batch := make([]store.Append, min(left, 1000))
			for i := range batch {
				batch[i] = store.Append{Run: run, Case: cases[k].c, Kind: "BenchStep", Fields: []byte(fmt.Sprintf(`{"n":%d,"payload":"some caller data to seal"}`, i))}
			}
			if _, err := j.Append(ctx, 1, batch); err != nil {
				return nil, err
			}
			h, err := s.Head(ctx, run)
			if err != nil {
				return nil, err
			}
			cases[k].runs = append(cases[k].runs, run)
			cases[k].heads = append(cases[k].heads, h)
		}
	}
	res.Runs = len(cases[0].runs)
	start := time.Now()
	if _, err := ring.Erase(ctx, sealed.CaseScope(j.Tenant(), cases[0].c)); err != nil {
		return nil, err
	}
	res.KeyMicros = float64(time.Since(start).Microseconds())
	start = time.Now()
	if _, err := j.Erase(ctx, sealed.Erasure{Scope: sealed.CaseScope(j.Tenant(), cases[1].c), Actor: store.Operator{Actor: "bench", Basis: store.Asserted}, Reason: "bench"}); err != nil {
		return nil, err
	}
	res.EraseMicros = float64(time.Since(start).Microseconds())
	res.Untouched = true
	for _, c := range cases {
		for i, run := range c.runs {
			h, err := s.Head(ctx, run)
			if err != nil {
				return nil, err
			}
			if h != c.heads[i] {
				res.Untouched = false
			}
		}
	}
	res.Load[1] = loadAverage()
	return res, nil
}

func printEraseBench(w io.Writer, e *eraseBench) {
	untouched := "records untouched"
	if !e.Untouched {
		untouched = "RECORDS CHANGED"
	}
	fmt.Fprintf(w, "erase a case of %d sealed records (%d runs): key %.0f µs, whole erasure (key + recorded act) %.0f µs; %s; load %.1f -> %.1f\n",
		e.Records, e.Runs, e.KeyMicros, e.EraseMicros, untouched, e.Load[0], e.Load[1])
}
