package storetest

// Discovery: the activity and id listings are total orders that list every run once.

import (
	"time"

	"github.com/runseal/runseal/store"
)

func checkRecentTotalOrder(t *T) {
	j, _ := t.Open()
	const n = 11
	for i := 0; i < n; i++ {
		t.append(j, 1, note(store.NewRunID(), "same second"))
	}
	var seen []store.Activity
	var after *store.Activity
	for {
		page, err := j.RecentRuns(t.ctx, after, 3)
		if err != nil {
			t.Fatalf("RecentRuns: %v", err)
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, page...)
		after = &page[len(page)-1]
		if len(seen) > n {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("paging served %d runs, want each of %d exactly once", len(seen), n)
	}
	ids := map[store.RunID]bool{}
	for i, a := range seen {
		ids[a.Run] = true
		if i > 0 {
			p := seen[i-1]
			if a.At > p.At || (a.At == p.At && a.Run.String() >= p.Run.String()) {
				t.Fatalf("not in (at, run) descending order at %d: %+v then %+v", i, p, a)
			}
		}
	}
	if len(ids) != n {
		t.Fatalf("paging served duplicates")
	}
}

func checkRecentNewest(t *T) {
	j, clk := t.Open()
	a, b := store.NewRunID(), store.NewRunID()
	t.append(j, 1, note(a, "1"))
	clk.Advance(2 * time.Second)
	t.append(j, 1, note(b, "2"))
	clk.Advance(2 * time.Second)
	t.append(j, 1, note(a, "3"))
	got, err := j.RecentRuns(t.ctx, nil, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("RecentRuns = %v, %v", got, err)
	}
	if got[0].Run != a || got[1].Run != b || got[0].At <= got[1].At {
		t.Errorf("RecentRuns = %+v, want %s (latest append) first", got, a)
	}
}

func checkRunsByID(t *T) {
	j, clk := t.Open()
	var all []store.RunID
	for i := 0; i < 7; i++ {
		r := store.NewRunID()
		all = append(all, r)
		t.append(j, 1, note(r, "x"))
	}
	var seen []store.RunID
	var after *store.RunID
	for i := 0; i < 10; i++ {
		page, err := j.RunsByID(t.ctx, after, 2)
		if err != nil {
			t.Fatalf("RunsByID: %v", err)
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, page...)
		after = &page[len(page)-1]
		// A run appending during the walk must not move in this order.
		clk.Advance(time.Second)
		t.append(j, 1, note(all[0], "activity"))
	}
	t.runs(seen, all...) // ULIDs minted in order sort in order
}

func checkRecentFrom(t *T) {
	j, _ := t.Open()
	mine, theirs, none := store.NewRunID(), store.NewRunID(), store.NewRunID()
	t.append(j, 1, admit(mine, "a", "peer-1"))
	t.append(j, 1, admit(theirs, "b", "peer-2"))
	t.append(j, 1, admit(none, "", ""))
	got, err := j.RecentRunsFrom(t.ctx, "peer-1", nil, 10)
	if err != nil || len(got) != 1 || got[0].Run != mine {
		t.Fatalf("RecentRunsFrom(peer-1) = %v, %v, want only %s", got, err, mine)
	}
	t.append(j, 1, note(mine, "later"))
	if _, err := j.ForgetAdmissions(t.ctx, time.Now().Add(100*365*24*time.Hour)); err != nil {
		t.Fatalf("ForgetAdmissions: %v", err)
	}
	if got, _ := j.RecentRunsFrom(t.ctx, "peer-1", nil, 10); len(got) != 1 {
		t.Errorf("source forgotten with the admission key: %v", got)
	}
}
