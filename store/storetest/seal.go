package storetest

// Seal: a sealed run is frozen, the first seal wins, and only the chain's
// latest sealing conclusion seals.

import (
	"time"

	"github.com/runseal/runseal/store"
)

func checkSealFreezes(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	l := t.acquire(j, run, "a", 30*time.Second)
	t.append(j, l.Epoch, note(run, "work"))
	t.concludeAndSeal(j, run, l.Epoch, "succeeded")
	_, err := j.Append(t.ctx, l.Epoch, []store.Append{note(run, "after")})
	rs := expect[*store.RunSealedError](t, err, "append to a sealed run under the current epoch")
	if rs.Outcome != "succeeded" {
		t.Errorf("RunSealed.Outcome = %q", rs.Outcome)
	}
	t.append(j, 1, note(store.NewRunID(), "other runs still open"))
}

func checkFirstSealWins(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	recs := t.append(j, 1, note(run, "a"), conclude(run, "succeeded"))
	d1 := t.sealed(j, run, 1, "succeeded")
	if d1 != recs[1].Hash {
		t.Fatalf("Seal = %s, want terminal hash %s", d1, recs[1].Hash)
	}
	d2 := t.sealed(j, run, 1, "succeeded")
	if d2 != d1 {
		t.Errorf("re-seal returned %s, want %s", d2, d1)
	}
	d3, err := j.Seal(t.ctx, run, 1, "cancelled")
	if err == nil && d3 != d1 {
		t.Errorf("re-seal with another outcome changed the digest")
	}
	p, err := j.LogPositions(t.ctx, []store.RunID{run})
	if err == nil && (len(p) != 1 || p[0] == nil || p[0].Index != 0 || p[0].Leaf != d1) {
		t.Errorf("log positions after re-seal = %+v, want one leaf at 0", p)
	}
	other := store.NewRunID()
	t.append(j, 1, conclude(other, "quarantined"))
	t.sealed(j, other, 1, "quarantined")
	if p, err := j.LogPositions(t.ctx, []store.RunID{other}); err == nil && (p[0] == nil || p[0].Index != 1) {
		t.Errorf("re-seal took a log index: next seal at %+v, want index 1", p[0])
	}
}

func checkOnlyFinalSeal(t *T) {
	j, _ := t.Open()
	for _, outcome := range []string{"failed", "exhausted"} {
		run := store.NewRunID()
		t.append(j, 1, conclude(run, outcome))
		_, err := j.Seal(t.ctx, run, 1, outcome)
		expect[*store.InvalidArgumentError](t, err, "sealing a "+outcome+" run")
		t.append(j, 1, note(run, "resumed")) // still open for resume
	}
	for _, outcome := range []string{"succeeded", "quarantined", "cancelled"} {
		run := store.NewRunID()
		t.append(j, 1, conclude(run, outcome))
		t.sealed(j, run, 1, outcome)
	}
}

func checkSealNeedsConclusion(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "a"))
	_, err := j.Seal(t.ctx, run, 1, "succeeded")
	expect[*store.InvalidArgumentError](t, err, "sealing a run that never concluded")
	t.append(j, 1, conclude(run, "quarantined"))
	_, err = j.Seal(t.ctx, run, 1, "succeeded")
	expect[*store.InvalidArgumentError](t, err, "sealing with an outcome other than the latest conclusion")
	t.sealed(j, run, 1, "quarantined")
}

func checkSealUnknown(t *T) {
	j, _ := t.Open()
	_, err := j.Seal(t.ctx, store.NewRunID(), 1, "succeeded")
	expect[*store.NotFoundError](t, err, "sealing an unknown run")
}
