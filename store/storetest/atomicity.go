package storetest

// Atomicity: a batch names one run and commits whole or not at all; a
// refused member does not sink others.

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/runseal/runseal/store"
)

func checkBatchOneRun(t *T) {
	j, _ := t.Open()
	r1, r2 := store.NewRunID(), store.NewRunID()
	_, err := j.Append(t.ctx, 1, []store.Append{note(r1, "a"), note(r2, "b")})
	expect[*store.InvalidArgumentError](t, err, "a batch spanning two runs")
	if t.head(j, r1).Seq != 0 || t.head(j, r2).Seq != 0 {
		t.Errorf("a refused two-run batch wrote")
	}
	_, err = j.Append(t.ctx, 1, nil)
	expect[*store.InvalidArgumentError](t, err, "an empty batch")
}

func checkRejectedBatch(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	k := key("k")
	t.append(j, 1, effectStarted(run, k))
	c := store.NewCaseID()
	bad := []store.Append{
		admit(run, "order-1", "shop"),
		{Run: run, Case: c, Kind: "Note", Fields: []byte(`{}`)},
		conclude(run, "quarantined"),
		effectStarted(run, k), // refused: the whole batch must vanish
	}
	_, err := j.Append(t.ctx, 1, bad)
	expect[*store.DuplicateEffectError](t, err, "batch ending in a duplicate effect")
	if h := t.head(j, run); h.Seq != 1 {
		t.Errorf("head seq %d after refused batch, want 1", h.Seq)
	}
	if r, ok, _ := j.AdmittedAs(t.ctx, "order-1"); ok {
		t.Errorf("refused batch claimed admission key for %s", r)
	}
	if n, _ := j.CountByOutcome(t.ctx, "quarantined"); n != 0 {
		t.Errorf("refused batch reached the outcome index")
	}
	if recs, _ := j.CaseHistory(t.ctx, c, 10); len(recs) != 0 {
		t.Errorf("refused batch reached the case index")
	}
	if got, _ := j.RecentRunsFrom(t.ctx, "shop", nil, 10); len(got) != 0 {
		t.Errorf("refused batch reached the source index")
	}
}

func checkGroupIsolation(t *T) {
	j, _ := t.Open()
	k := key("k")
	dup := store.NewRunID()
	t.append(j, 1, effectStarted(dup, k))
	const n = 32
	var wg sync.WaitGroup
	errs := make([]error, n)
	runs := make([]store.RunID, n)
	for i := 0; i < n; i++ {
		runs[i] = store.NewRunID()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				_, errs[i] = j.Append(t.ctx, 1, []store.Append{effectStarted(dup, k)})
			} else {
				_, errs[i] = j.Append(t.ctx, 1, []store.Append{note(runs[i], "ok")})
			}
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 {
			var d *store.DuplicateEffectError
			if !errors.As(err, &d) {
				t.Errorf("duplicate %d: err %v, want DuplicateEffect", i, err)
			}
		} else if err != nil {
			t.Errorf("innocent append %d sank with a refused neighbour: %v", i, err)
		} else if t.head(j, runs[i]).Seq != 1 {
			t.Errorf("innocent append %d acknowledged but not stored", i)
		}
	}
}

func checkTooLarge(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	big := fmt.Sprintf(`{"blob":%q}`, strings.Repeat("x", store.MaxRecordBytes))
	_, err := j.Append(t.ctx, 1, []store.Append{note(run, "first"), {Run: run, Kind: "Note", Fields: []byte(big)}})
	expect[*store.RecordTooLargeError](t, err, "a record over 1 MiB")
	if h := t.head(j, run); h.Seq != 0 {
		t.Errorf("oversized batch wrote: head seq %d", h.Seq)
	}
}

func checkInvalidFields(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	for _, a := range []store.Append{
		{Run: run, Kind: "Note", Fields: []byte(`{"seq":5}`)},
		{Run: run, Kind: "Note", Fields: []byte(`[1]`)},
		{Run: run, Kind: "Note", Fields: []byte(`{"a":1,"a":2}`)},
		{Run: run, Kind: "", Fields: nil},
		{Run: run, Kind: "has space"},
		{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{}`)},
		{Run: run, Kind: store.KindRunSuspended, Fields: []byte(`{"awaiting":"time","until":"tomorrow"}`)},
		{Run: run, Kind: "Note", Phase: "sideways"},
	} {
		_, err := j.Append(t.ctx, 1, []store.Append{a})
		ia := expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("append kind %q fields %s", a.Kind, a.Fields))
		if ia.Field == "" {
			t.Errorf("invalid argument names no field: %v", ia)
		}
	}
	if h := t.head(j, run); h.Seq != 0 {
		t.Errorf("invalid appends wrote: head seq %d", h.Seq)
	}
}
