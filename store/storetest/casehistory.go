package storetest

// Case history: a case's records and runs, whichever run wrote them.

import (
	"fmt"
	"strings"

	"github.com/runseal/runseal/store"
)

func checkCaseHistory(t *T) {
	j, _ := t.Open()
	c1, c2 := store.NewCaseID(), store.NewCaseID()
	owner, sweep, other := store.NewRunID(), store.NewRunID(), store.NewRunID()
	t.append(j, 1, store.Append{Run: owner, Case: c1, Kind: "Opened"})
	t.append(j, 1, store.Append{Run: other, Case: c2, Kind: "Opened"})
	// A sweep belongs to no case but stamps the records it writes about one.
	t.append(j, 1, note(sweep, "tick"), store.Append{Run: sweep, Case: c1, Kind: "Escalated"})
	t.append(j, 1, store.Append{Run: owner, Case: c1, Kind: "Closed"})
	got, err := j.CaseHistory(t.ctx, c1, 10)
	if err != nil {
		t.Fatalf("CaseHistory: %v", err)
	}
	var kinds []string
	for _, r := range got {
		if r.Case != c1 {
			t.Errorf("case history of %s holds a record of case %s", c1, r.Case)
		}
		kinds = append(kinds, r.Kind)
	}
	if strings.Join(kinds, ",") != "Opened,Escalated,Closed" {
		t.Errorf("case history kinds = %v, want Opened,Escalated,Closed (the sweep's record included, oldest first)", kinds)
	}
}

func checkCaseBounded(t *T) {
	j, _ := t.Open()
	c := store.NewCaseID()
	run := store.NewRunID()
	for i := 0; i < 5; i++ {
		t.append(j, 1, store.Append{Run: run, Case: c, Kind: "Step", Fields: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	got, err := j.CaseHistory(t.ctx, c, 3)
	if err != nil || len(got) != 3 {
		t.Fatalf("CaseHistory(limit 3) = %d records, %v", len(got), err)
	}
	for i, r := range got {
		if r.Seq != store.Seq(i+1) {
			t.Errorf("case history not oldest first: %d at %d", r.Seq, i)
		}
	}
}

func checkCaseRuns(t *T) {
	j, _ := t.Open()
	c, other := store.NewCaseID(), store.NewCaseID()
	var touched []store.RunID
	for i := 0; i < 5; i++ {
		r := store.NewRunID()
		touched = append(touched, r)
		t.append(j, 1, note(r, "unrelated"), store.Append{Run: r, Case: c, Kind: "Touched"}, store.Append{Run: r, Case: c, Kind: "Again"})
	}
	t.append(j, 1, store.Append{Run: store.NewRunID(), Case: other, Kind: "Elsewhere"})
	var got []store.RunID
	var after *store.RunID
	for i := 0; i < 10; i++ {
		page, err := j.CaseRuns(t.ctx, c, after, 2)
		if err != nil {
			t.Fatalf("CaseRuns: %v", err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = &page[len(page)-1]
	}
	t.runs(got, touched...)
}
