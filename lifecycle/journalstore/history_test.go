package journalstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
)

// history is a study's records as the journal holds them, read back after
// a multi-process run: the study run, each trial run, and how many times
// each trial run is a leaf of the log. The checker below reads it without
// journalstore's fold, so that a fold that accepted a bad history cannot
// hide it.
type history struct {
	budget uint64
	study  []store.Record
	trials map[store.RunID][]store.Record
	seals  map[store.RunID]int
}

// The violation kinds the checker reports; each message starts with one.
const (
	vBudget      = "budget"       // a trial reserved past the budget, or a number reused
	vTwoOwners   = "two-owners"   // two claims of one trial at one epoch, or an epoch going back
	vSealedOnce  = "sealed-once"  // a terminal trial not ended once and sealed once
	vEffectOnce  = "effect-once"  // an outbox effect not completed exactly once
	vReplaceOnce = "replace-once" // a replacement trial created other than once
)

// readHistory reads a study's history from j.
func readHistory(ctx context.Context, j store.Journal, study string, budget uint64) (*history, error) {
	c, err := store.ParseCaseID(study)
	if err != nil {
		return nil, err
	}
	h := &history{budget: budget, trials: map[store.RunID][]store.Record{}, seals: map[store.RunID]int{}}
	if h.study, err = j.Read(ctx, store.RunID(c), 1); err != nil {
		return nil, err
	}
	var after *store.RunID
	var runs []store.RunID
	for {
		page, err := j.CaseRuns(ctx, c, after, store.MaxLimit)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			if r != store.RunID(c) {
				runs = append(runs, r)
			}
		}
		after = &page[len(page)-1]
	}
	for _, r := range runs {
		if h.trials[r], err = j.Read(ctx, r, 1); err != nil {
			return nil, err
		}
	}
	pos, err := j.LogPositions(ctx, runs)
	if err != nil {
		return nil, err
	}
	for i, p := range pos {
		if p != nil {
			h.seals[runs[i]]++
		}
	}
	return h, nil
}

type hFields struct {
	Trial      string  `json:"trial"`
	Number     *uint64 `json:"number"`
	OwnerEpoch uint64  `json:"owner_epoch"`
	Owner      string  `json:"owner"`
	Name       string  `json:"name"`
	Status     string  `json:"status"`
	NewTrial   string  `json:"new_trial"`
	Phase      string  `json:"outbox_phase"`
	Effects    []struct {
		Name string `json:"name"`
	} `json:"effects"`
}

// check returns every violation of the multi-process invariants.
func (h *history) check() []string {
	var out []string
	bad := func(kind, format string, args ...any) { out = append(out, kind+": "+fmt.Sprintf(format, args...)) }
	fields := func(r store.Record) hFields {
		var f hFields
		if err := json.Unmarshal(r.Fields, &f); err != nil {
			bad("format", "run %s seq %d: %v", r.Run, r.Seq, err)
		}
		return f
	}
	numbers := map[uint64]string{}
	reserve := func(trial string, n *uint64, how string) {
		if n == nil {
			bad(vBudget, "%s of %s has no number", how, trial)
			return
		}
		if *n >= h.budget {
			bad(vBudget, "%s of %s is number %d, past the budget of %d", how, trial, *n, h.budget)
		}
		if prev, ok := numbers[*n]; ok {
			bad(vBudget, "number %d given to %s and to %s", *n, prev, trial)
		}
		numbers[*n] = trial
	}
	terminals := map[string]int{}
	type effectKey struct {
		trial string
		epoch uint64
		name  string
	}
	declared := map[effectKey]bool{}
	completed := map[effectKey]int{}
	replacements := map[string]int{}
	for _, r := range h.study {
		f := fields(r)
		switch r.Kind {
		case journalstore.RecordTrialReserved:
			reserve(f.Trial, f.Number, "reservation")
		case journalstore.RecordTrialTerminal:
			terminals[f.Trial]++
		case journalstore.RecordOutboxAdvanced:
			for _, e := range f.Effects {
				declared[effectKey{f.Trial, f.OwnerEpoch, e.Name}] = true
			}
		case journalstore.RecordEffectCompleted:
			completed[effectKey{f.Trial, f.OwnerEpoch, f.Name}]++
		case journalstore.RecordReplacementCreated:
			completed[effectKey{f.Trial, f.OwnerEpoch, f.Name}]++
			if f.Status == "created" {
				reserve(f.NewTrial, f.Number, "replacement")
				replacements[f.NewTrial]++
			}
		}
	}
	for _, k := range slices.SortedFunc(func(yield func(effectKey) bool) {
		for k := range declared {
			if !yield(k) {
				return
			}
		}
		for k := range completed {
			if !declared[k] && !yield(k) {
				return
			}
		}
	}, func(a, b effectKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) }) {
		switch n := completed[k]; {
		case !declared[k]:
			bad(vEffectOnce, "effect %q of (%s, %d) completed %d times but never declared", k.name, k.trial, k.epoch, n)
		case n != 1:
			bad(vEffectOnce, "effect %q of (%s, %d) completed %d times", k.name, k.trial, k.epoch, n)
		}
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range replacements {
			if !yield(id) {
				return
			}
		}
	}) {
		created := 0
		for _, r := range h.trials[mustRun(id)] {
			if r.Kind == journalstore.RecordTrialCreated {
				created++
			}
		}
		if n := replacements[id]; n != 1 || created != 1 {
			bad(vReplaceOnce, "replacement %s: created by %d study records and %d trial run records", id, n, created)
		}
	}
	runs := slices.SortedFunc(func(yield func(store.RunID) bool) {
		for r := range h.trials {
			if !yield(r) {
				return
			}
		}
	}, func(a, b store.RunID) int { return strings.Compare(a.String(), b.String()) })
	for _, run := range runs {
		owners := map[store.Epoch]string{}
		var last store.Epoch
		concluded := 0
		for _, r := range h.trials[run] {
			switch r.Kind {
			case journalstore.RecordTrialClaimed:
				f := fields(r)
				if prev, ok := owners[r.Epoch]; ok {
					bad(vTwoOwners, "trial %s epoch %d claimed by %q and by %q", run, r.Epoch, prev, f.Owner)
				} else if r.Epoch <= last {
					bad(vTwoOwners, "trial %s claimed at epoch %d after epoch %d", run, r.Epoch, last)
				}
				owners[r.Epoch] = f.Owner
				last = max(last, r.Epoch)
			case store.KindRunConcluded:
				concluded++
			}
		}
		id := run.String()
		t, s := terminals[id], h.seals[run]
		if (t > 0 || concluded > 0 || s > 0) && (t != 1 || concluded != 1 || s != 1) {
			bad(vSealedOnce, "trial %s: %d terminal records in the study run, %d conclusions in its run, sealed %d times", id, t, concluded, s)
		}
	}
	return out
}

func mustRun(id string) store.RunID {
	r, _ := store.ParseRunID(id)
	return r
}

// TestHistoryCheckerCatchesEachViolation feeds the multi-process test's
// checker a good history and then, one per violation kind, a history
// broken in that one way: it must pass the first and name the kind of
// each other.
func TestHistoryCheckerCatchesEachViolation(t *testing.T) {
	c := store.NewCaseID()
	studyRun := store.RunID(c)
	t1, t2, t3 := store.NewRunID(), store.NewRunID(), store.NewRunID()
	rec := func(run store.RunID, epoch store.Epoch, kind string, fields string) store.Record {
		return store.Record{Body: store.Body{Run: run, Epoch: epoch, Kind: kind, Fields: []byte(fields)}}
	}
	good := func() *history {
		return &history{
			budget: 3,
			study: []store.Record{
				rec(studyRun, 1, journalstore.RecordTrialReserved, fmt.Sprintf(`{"trial":%q,"number":0,"managed":true}`, t1)),
				rec(studyRun, 1, journalstore.RecordTrialReserved, fmt.Sprintf(`{"trial":%q,"number":1,"managed":true}`, t2)),
				rec(studyRun, 1, journalstore.RecordTrialTerminal, fmt.Sprintf(`{"trial":%q,"owner_epoch":2,"state":"complete","cause":"terminal"}`, t1)),
				rec(studyRun, 1, journalstore.RecordOutboxAdvanced, fmt.Sprintf(`{"trial":%q,"owner_epoch":2,"outbox_phase":"effects","effects":[{"name":"n","kind":"external"},{"name":"r","kind":"replacement"}]}`, t1)),
				rec(studyRun, 1, journalstore.RecordEffectCompleted, fmt.Sprintf(`{"trial":%q,"owner_epoch":2,"name":"n"}`, t1)),
				rec(studyRun, 1, journalstore.RecordReplacementCreated, fmt.Sprintf(`{"trial":%q,"owner_epoch":2,"name":"r","status":"created","new_trial":%q,"number":2}`, t1, t3)),
			},
			trials: map[store.RunID][]store.Record{
				t1: {
					rec(t1, 1, journalstore.RecordTrialCreated, `{}`),
					rec(t1, 2, journalstore.RecordTrialClaimed, `{"owner":"a"}`),
					rec(t1, 2, journalstore.RecordTrialTerminal, `{}`),
					rec(t1, 2, store.KindRunConcluded, `{"outcome":"trial-complete"}`),
				},
				t2: {
					rec(t2, 1, journalstore.RecordTrialCreated, `{}`),
					rec(t2, 2, journalstore.RecordTrialClaimed, `{"owner":"a"}`),
					rec(t2, 3, journalstore.RecordTrialClaimed, `{"owner":"b"}`),
				},
				t3: {rec(t3, 1, journalstore.RecordTrialCreated, `{}`)},
			},
			seals: map[store.RunID]int{t1: 1},
		}
	}
	if v := good().check(); len(v) != 0 {
		t.Fatalf("a good history: %v", v)
	}
	cases := []struct {
		kind   string
		break_ func(h *history)
	}{
		{vBudget, func(h *history) { h.budget = 2 }},
		{vBudget, func(h *history) {
			h.study[1] = rec(studyRun, 1, journalstore.RecordTrialReserved, fmt.Sprintf(`{"trial":%q,"number":0,"managed":true}`, t2))
		}},
		{vTwoOwners, func(h *history) {
			h.trials[t2] = append(h.trials[t2], rec(t2, 3, journalstore.RecordTrialClaimed, `{"owner":"c"}`))
		}},
		{vTwoOwners, func(h *history) {
			h.trials[t2] = append(h.trials[t2], rec(t2, 2, journalstore.RecordTrialClaimed, `{"owner":"c"}`))
		}},
		{vSealedOnce, func(h *history) { h.seals[t1] = 0 }},
		{vSealedOnce, func(h *history) {
			h.study = append(h.study, rec(studyRun, 1, journalstore.RecordTrialTerminal, fmt.Sprintf(`{"trial":%q,"owner_epoch":2,"state":"failed","cause":"stale"}`, t1)))
		}},
		{vSealedOnce, func(h *history) {
			h.trials[t2] = append(h.trials[t2], rec(t2, 3, store.KindRunConcluded, `{"outcome":"trial-complete"}`))
		}},
		{vEffectOnce, func(h *history) { h.study = slices.Delete(h.study, 4, 5) }},
		{vEffectOnce, func(h *history) { h.study = append(h.study, h.study[4]) }},
		{vEffectOnce, func(h *history) {
			h.study = append(h.study, rec(studyRun, 1, journalstore.RecordEffectCompleted, fmt.Sprintf(`{"trial":%q,"owner_epoch":2,"name":"ghost"}`, t1)))
		}},
		{vReplaceOnce, func(h *history) { h.trials[t3] = append(h.trials[t3], h.trials[t3][0]) }},
		{vReplaceOnce, func(h *history) { delete(h.trials, t3) }},
	}
	for i, tc := range cases {
		h := good()
		tc.break_(h)
		v := h.check()
		found := slices.ContainsFunc(v, func(s string) bool { return strings.HasPrefix(s, tc.kind+":") })
		if !found {
			t.Errorf("case %d: a history with a %s violation passed the checker: %v", i, tc.kind, v)
		}
	}
}
