package storetest

// Bounds: every listing limit is validated.

import (
	"fmt"

	"github.com/runseal/runseal/store"
)

func checkLimits(t *T) {
	j, _ := t.Open()
	for _, limit := range []int{0, -1, store.MaxLimit + 1} {
		_, err := j.RunsByOutcome(t.ctx, "failed", limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("RunsByOutcome limit %d", limit))
		_, err = j.RecentRuns(t.ctx, nil, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("RecentRuns limit %d", limit))
		_, err = j.AbandonedRuns(t.ctx, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("AbandonedRuns limit %d", limit))
		_, err = j.WaitingRuns(t.ctx, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("WaitingRuns limit %d", limit))
		_, err = j.ReadPage(t.ctx, store.NewRunID(), 1, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("ReadPage limit %d", limit))
		_, err = j.CaseHistory(t.ctx, store.NewCaseID(), limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("CaseHistory limit %d", limit))
		_, err = j.RunsByID(t.ctx, nil, limit)
		expect[*store.InvalidArgumentError](t, err, fmt.Sprintf("RunsByID limit %d", limit))
	}
	_, err := j.RunsByOutcome(t.ctx, "Not An Outcome", 5)
	expect[*store.InvalidArgumentError](t, err, "RunsByOutcome with a malformed outcome")
}
