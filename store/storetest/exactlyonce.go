package storetest

// Exactly-once: a second EffectStarted for one effect key in one run is refused.

import (
	"github.com/runseal/runseal/store"
)

func checkDuplicateEffect(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	k := key("charge card")
	t.append(j, 1, effectStarted(run, k))
	_, err := j.Append(t.ctx, 1, []store.Append{note(run, "between"), effectStarted(run, k)})
	d := expect[*store.DuplicateEffectError](t, err, "second EffectStarted for one key")
	if d.Key != k || d.Run != run {
		t.Errorf("DuplicateEffect = %+v, want run %s key %s", d, run, k)
	}
	if h := t.head(j, run); h.Seq != 1 {
		t.Errorf("refused batch wrote: head seq %d, want 1", h.Seq)
	}
}

func checkEffectOtherRun(t *T) {
	j, _ := t.Open()
	k := key("shared")
	r1, r2 := store.NewRunID(), store.NewRunID()
	t.append(j, 1, effectStarted(r1, k))
	if _, err := j.Append(t.ctx, 1, []store.Append{effectStarted(r2, k)}); err != nil {
		t.Fatalf("same effect key in another run refused: %v", err)
	}
}

func checkDuplicateInBatch(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	k := key("twice")
	_, err := j.Append(t.ctx, 1, []store.Append{effectStarted(run, k), effectStarted(run, k)})
	expect[*store.DuplicateEffectError](t, err, "two EffectStarted for one key in one batch")
	if h := t.head(j, run); h.Seq != 0 {
		t.Errorf("refused batch wrote: head seq %d", h.Seq)
	}
}

func checkEffectOtherKinds(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	k := key("k")
	t.append(j, 1, effectStarted(run, k))
	done := store.Append{Run: run, Kind: "EffectDone", EffectKey: &k, Fields: []byte(`{"output":1}`)}
	t.append(j, 1, done, done)
	_, err := j.Append(t.ctx, 1, []store.Append{{Run: run, Kind: store.KindEffectStarted}})
	expect[*store.InvalidArgumentError](t, err, "EffectStarted without an effect key")
}
