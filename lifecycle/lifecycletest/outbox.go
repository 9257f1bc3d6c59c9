package lifecycletest

import (
	"encoding/json"
	"math"
	"slices"
	"strings"

	"github.com/runseal/runseal/lifecycle"
)

var outboxChecks = []check{
	{"outbox.terminal-with-intent-atomic", checkOutboxTerminalWithIntent},
	{"outbox.terminal-with-intent-rejection-writes-nothing", checkOutboxTerminalRejection},
	{"outbox.advance-explicit-phases", checkOutboxPhases},
	{"outbox.advance-replay-noop", checkOutboxReplay},
	{"outbox.advance-skip-conflict", checkOutboxSkip},
	{"outbox.effects-current-until-complete", checkOutboxEffectsCurrent},
	{"outbox.effect-replay-differs-conflict", checkOutboxEffectReplay},
	{"outbox.advance-incompatible-writes-nothing", checkOutboxIncompatible},
	{"outbox.unknown-keys", checkOutboxUnknown},
	{"outbox.list-key-order", checkOutboxListOrder},
	{"outbox.page-order-and-continuation", checkOutboxPageOrder},
	{"outbox.page-byte-bound", checkOutboxPageBytes},
	{"outbox.page-limits-refused", checkOutboxPageLimits},
	{"outbox.page-cursor-validated", checkOutboxPageCursor},
	{"outbox.complete-effect-idempotent", checkOutboxCompleteIdempotent},
	{"outbox.effect-kinds-enforced", checkOutboxEffectKinds},
	{"outbox.create-replacement-idempotent", checkOutboxReplacementIdempotent},
	{"outbox.create-replacement-budget", checkOutboxReplacementBudget},
	{"outbox.put-finalized-state", checkOutboxPutFinalized},
	{"outbox.operation-is-context-only", checkOutboxOperation},
}

func external(name, payload string) lifecycle.OutboxEffect {
	return lifecycle.OutboxEffect{Name: name, Kind: lifecycle.EffectExternal, Payload: json.RawMessage(payload)}
}

func replacement(name string, budget uint64) lifecycle.OutboxEffect {
	return lifecycle.OutboxEffect{Name: name, Kind: lifecycle.EffectReplacement, Replacement: &lifecycle.ReplacementSpec{
		MaxTrials: budget,
		Params:    []lifecycle.Param{{Name: "x", Value: 0.25}},
		States:    []lifecycle.StateBlob{trialBlob("retry", "retry.count", 1, "1")},
	}}
}

// atEffects returns a record advanced to PhaseEffects with the given effects.
func (c *checker) atEffects(study lifecycle.StudyID, effects ...lifecycle.OutboxEffect) lifecycle.OutboxKey {
	key := c.told(study)
	c.advance(key, lifecycle.PhaseCallbacks)
	c.advance(key, lifecycle.PhaseEffects, effects...)
	return key
}

func checkOutboxTerminalWithIntent(c *checker) {
	s := c.study(defaultSpec)
	for seq := uint64(1); seq <= 2; seq++ {
		tok := c.running(s, "a")
		key, err := c.b.TerminalWithIntent(c.ctx, complete(tok, 0.5), testIntent)
		c.ok(err, "terminal with intent")
		if key != (lifecycle.OutboxKey{Trial: tok.Trial, Epoch: tok.Epoch}) {
			c.Errorf("terminal with intent: want key (%s, %d), got %v", tok.Trial, tok.Epoch, key)
		}
		if obs := c.observe(tok.Trial); obs.State != lifecycle.TrialComplete {
			c.Errorf("terminal with intent: trial is %s, want complete", obs.State)
		}
		rec := c.outbox(key)
		if rec.Key != key || rec.Study != s || rec.TerminalSeq != seq || rec.Outcome != lifecycle.TrialComplete ||
			rec.Cause != lifecycle.CauseTerminal || rec.Phase != lifecycle.PhaseInitial ||
			rec.Intent.Kind != testIntent.Kind || string(rec.Intent.Data) != string(testIntent.Data) || len(rec.Effects) != 0 {
			c.Errorf("terminal with intent %d: record %+v does not match the outcome and intent", seq, rec)
		}
	}
}

func checkOutboxTerminalRejection(c *checker) {
	s := c.study(defaultSpec)
	old := c.running(s, "a")
	c.pause(old)
	cur := c.claim(old.Trial, "b")
	c.ok(c.b.FencedMutate(c.ctx, lifecycle.FencedMutationRequest{Owner: cur, States: []lifecycle.StateBlob{trialBlob("m", "k", 1, "v")}}), "seed")
	incompatible := complete(cur, 1)
	incompatible.States = []lifecycle.StateBlob{trialBlob("m", "k", 2, "v")}
	before := c.snapshot(s, cur.Trial)
	for _, tc := range []struct {
		name   string
		req    lifecycle.TerminalRequest
		intent lifecycle.FinalizationIntent
		kind   lifecycle.Kind
	}{
		{"a stale token", complete(old, 1), testIntent, lifecycle.KindLeaseLost},
		{"invalid values", lifecycle.TerminalRequest{Owner: cur, State: lifecycle.TrialComplete}, testIntent, lifecycle.KindInvalid},
		{"an intent without a kind", complete(cur, 1), lifecycle.FinalizationIntent{}, lifecycle.KindInvalid},
		{"intent data that is not JSON", complete(cur, 1), lifecycle.FinalizationIntent{Kind: "k", Data: json.RawMessage("{")}, lifecycle.KindInvalid},
		{"an incompatible blob", incompatible, testIntent, lifecycle.KindIncompatible},
	} {
		_, err := c.b.TerminalWithIntent(c.ctx, tc.req, tc.intent)
		c.wantKind(err, tc.kind, "terminal with intent and "+tc.name)
	}
	c.unchanged(before, "refused terminal intents", s, cur.Trial)
}

func checkOutboxPhases(c *checker) {
	s := c.study(defaultSpec)
	key := c.told(s)
	steps := []struct {
		phase   lifecycle.OutboxPhase
		states  []lifecycle.StateBlob
		effects []lifecycle.OutboxEffect
	}{
		{lifecycle.PhaseCallbacks, []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "after-trial")}, nil},
		{lifecycle.PhaseEffects, []lifecycle.StateBlob{studyBlob("callbacks", "cb", 1, "ran"), trialBlob("summary", "s", 1, "ok")}, []lifecycle.OutboxEffect{external("notify", `{"to":"ops"}`)}},
	}
	for _, st := range steps {
		got, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: st.phase, States: st.states, Effects: st.effects})
		c.ok(err, "advance to "+string(st.phase))
		if got != st.phase || c.outbox(key).Phase != st.phase {
			c.Errorf("advance to %s: returned %s, stored %s", st.phase, got, c.outbox(key).Phase)
		}
	}
	study := c.inspectStudy(s)
	if !hasBlob(study.States, studyBlob("sampler", "tpe", 1, "after-trial")) || !hasBlob(study.States, studyBlob("callbacks", "cb", 1, "ran")) {
		c.Errorf("phase state did not reach the study: %+v", study.States)
	}
	if !hasBlob(c.inspect(key.Trial).States, trialBlob("summary", "s", 1, "ok")) {
		c.Errorf("phase state did not reach the trial")
	}
	if rec := c.outbox(key); len(rec.Effects) != 1 || rec.Effects[0].Name != "notify" {
		c.Errorf("published effects: %+v", rec.Effects)
	}
	c.ok(c.b.CompleteOutboxEffect(c.ctx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "notify"}}), "complete effect")
	c.advance(key, lifecycle.PhaseDone)
}

func checkOutboxReplay(c *checker) {
	s := c.study(defaultSpec)
	key := c.told(s)
	first := studyBlob("sampler", "tpe", 1, "first")
	_, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseCallbacks, States: []lifecycle.StateBlob{first}})
	c.ok(err, "advance to callbacks")
	before := c.snapshot(s, key.Trial)
	for _, phase := range []lifecycle.OutboxPhase{lifecycle.PhaseCallbacks, lifecycle.PhaseInitial} {
		got, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: phase, States: []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "replayed")}})
		if err != nil || got != lifecycle.PhaseCallbacks {
			c.Errorf("replaying %s at %s: want a no-op returning %s, got %s, %v", phase, lifecycle.PhaseCallbacks, lifecycle.PhaseCallbacks, got, err)
		}
	}
	c.unchanged(before, "replayed advances", s, key.Trial)
}

func checkOutboxSkip(c *checker) {
	s := c.study(defaultSpec)
	key := c.told(s)
	before := c.snapshot(s, key.Trial)
	for _, phase := range []lifecycle.OutboxPhase{lifecycle.PhaseEffects, lifecycle.PhaseDone} {
		_, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: phase, States: []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "v")}})
		c.wantKind(err, lifecycle.KindConflict, "advancing from initial to "+string(phase))
	}
	_, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: "sideways"})
	c.wantKind(err, lifecycle.KindInvalid, "advancing to an unknown phase")
	c.unchanged(before, "refused skips", s, key.Trial)
}

func checkOutboxEffectsCurrent(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, external("a", `1`), external("b", `2`))
	done := func(want lifecycle.OutboxPhase, what string) {
		got, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseDone})
		if err != nil || got != want || c.outbox(key).Phase != want {
			c.Errorf("advance to done %s: want cursor %s, got %s, %v", what, want, got, err)
		}
	}
	done(lifecycle.PhaseEffects, "with no effect complete")
	c.ok(c.b.CompleteOutboxEffect(c.ctx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "b"}}), "complete b")
	done(lifecycle.PhaseEffects, "with one of two effects complete")
	c.ok(c.b.CompleteOutboxEffect(c.ctx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "a"}}), "complete a")
	done(lifecycle.PhaseDone, "with every effect complete")
	if rec := c.outbox(key); len(rec.Completed) != 2 || rec.Completed[0].Name != "a" || rec.Completed[1].Name != "b" {
		c.Errorf("completed effects: want a and b in name order, got %+v", rec.Completed)
	}
	empty := c.atEffects(s)
	c.advance(empty, lifecycle.PhaseDone)
}

func checkOutboxEffectReplay(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, external("a", `{"n":1}`), replacement("retry", bigBudget))
	before := c.snapshot(s, key.Trial)
	for _, tc := range []struct {
		name    string
		effects []lifecycle.OutboxEffect
	}{
		{"a different payload", []lifecycle.OutboxEffect{external("a", `{"n":2}`)}},
		{"a different kind", []lifecycle.OutboxEffect{replacement("a", bigBudget)}},
		{"a different replacement", []lifecycle.OutboxEffect{replacement("retry", 7)}},
		{"an effect never published", []lifecycle.OutboxEffect{external("z", `1`)}},
	} {
		_, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseEffects, Effects: tc.effects})
		c.wantKind(err, lifecycle.KindConflict, "replaying the effects phase with "+tc.name)
	}
	got, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseEffects, Effects: []lifecycle.OutboxEffect{
		replacement("retry", bigBudget), external("a", `{ "n" : 1 }`),
	}})
	if err != nil || got != lifecycle.PhaseEffects {
		c.Errorf("replaying the effects phase with the same effects: want a no-op, got %s, %v", got, err)
	}
	c.unchanged(before, "effect replays", s, key.Trial)
}

func checkOutboxIncompatible(c *checker) {
	s := c.study(defaultSpec)
	key := c.told(s)
	c.advance(key, lifecycle.PhaseCallbacks)
	_, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseEffects, States: []lifecycle.StateBlob{studyBlob("sampler", "tpe", 1, "v1")}})
	c.ok(err, "advance with state")
	key2 := c.told(s)
	before := c.snapshot(s, key2.Trial)
	_, err = c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key2, Phase: lifecycle.PhaseCallbacks, States: []lifecycle.StateBlob{
		trialBlob("summary", "s", 1, "x"), studyBlob("sampler", "tpe", 2, "v2"),
	}})
	c.wantKind(err, lifecycle.KindIncompatible, "advance replacing study state of another version")
	_, err = c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: key2, Phase: lifecycle.PhaseCallbacks, States: []lifecycle.StateBlob{constraintsBlob(1, 2)}})
	c.wantKind(err, lifecycle.KindConflict, "advance writing canonical constraint state")
	c.unchanged(before, "refused advances", s, key2.Trial)
}

func checkOutboxUnknown(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, external("a", `1`))
	missing := lifecycle.OutboxKey{Trial: key.Trial, Epoch: key.Epoch + 1}
	if rec, ok, err := c.b.GetOutbox(c.ctx, missing); err != nil || ok {
		c.Errorf("get of an unknown outbox key: want absent, got %+v, %v, %v", rec, ok, err)
	}
	_, err := c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: missing, Phase: lifecycle.PhaseCallbacks})
	c.wantKind(err, lifecycle.KindNotFound, "advance of an unknown outbox key")
	for _, eff := range []lifecycle.OutboxEffectKey{{Outbox: missing, Name: "a"}, {Outbox: key, Name: "nope"}} {
		err := c.b.CompleteOutboxEffect(c.ctx, lifecycle.OutboxEffectCompletion{Effect: eff})
		c.wantKind(err, lifecycle.KindNotFound, "completing an unknown effect")
		_, err = c.b.CreateReplacement(c.ctx, eff)
		c.wantKind(err, lifecycle.KindNotFound, "replacing for an unknown effect")
	}
}

func checkOutboxListOrder(c *checker) {
	a, b := c.study(defaultSpec), c.study(defaultSpec)
	var keys []lifecycle.OutboxKey
	for _, s := range []lifecycle.StudyID{a, b, a, b, a} {
		keys = append(keys, c.told(s))
	}
	done := c.atEffects(a)
	c.advance(done, lifecycle.PhaseDone)
	keys = append(keys, done)
	list, err := c.b.ListOutbox(c.ctx)
	c.ok(err, "list outbox")
	var got []lifecycle.OutboxKey
	for _, r := range list {
		got = append(got, r.Key)
	}
	slices.SortFunc(keys, lifecycle.OutboxKey.Compare)
	if !slices.Equal(got, keys) {
		c.Errorf("list outbox: want every record, done ones included, in key order %v; got %v", keys, got)
	}
}

// pageAll walks a study's outbox page by page and returns every record
// and page, checking each page's bounds.
func (c *checker) pageAll(study lifecycle.StudyID, maxRecords, maxBytes uint64) ([]lifecycle.OutboxRecord, int) {
	var all []lifecycle.OutboxRecord
	req := lifecycle.OutboxPageRequest{Study: study, MaxRecords: maxRecords, MaxBytes: maxBytes}
	for pages := 1; ; pages++ {
		page, err := c.b.ListOutboxPage(c.ctx, req)
		c.ok(err, "list outbox page")
		if uint64(len(page.Records)) > maxRecords {
			c.Errorf("page of %d records over max_records %d", len(page.Records), maxRecords)
		}
		var used uint64
		for _, r := range page.Records {
			n, err := lifecycle.RecordSize(r)
			c.ok(err, "record size")
			used += uint64(n)
		}
		if used > maxBytes {
			c.Errorf("page of %d bytes over max_bytes %d", used, maxBytes)
		}
		all = append(all, page.Records...)
		if page.Next == nil {
			return all, pages
		}
		if len(page.Records) == 0 {
			c.Fatalf("an empty page carries a continuation: the traversal cannot progress")
		}
		if pages > 10000 {
			c.Fatalf("traversal does not end")
		}
		req.Cursor = page.Next
	}
}

func bySeq(recs []lifecycle.OutboxRecord) []lifecycle.OutboxKey {
	var keys []lifecycle.OutboxKey
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	return keys
}

func checkOutboxPageOrder(c *checker) {
	a, b := c.study(defaultSpec), c.study(defaultSpec)
	var want []lifecycle.OutboxKey
	for i := range 7 {
		want = append(want, c.told(a))
		if i%3 == 0 {
			c.told(b)
		}
	}
	c.advance(want[2], lifecycle.PhaseCallbacks)
	all, pages := c.pageAll(a, 2, math.MaxInt)
	if got := bySeq(all); !slices.Equal(got, want) {
		c.Errorf("paged traversal: want study a's records in terminal-sequence order %v, got %v", want, got)
	}
	if pages != 4 {
		c.Errorf("7 records at 2 a page: want 4 pages, got %d", pages)
	}
	for i, r := range all {
		if r.TerminalSeq != uint64(i+1) || r.Study != a {
			c.Errorf("record %d: terminal seq %d of study %s", i, r.TerminalSeq, r.Study)
		}
	}

	first, err := c.b.ListOutboxPage(c.ctx, lifecycle.OutboxPageRequest{Study: a, MaxRecords: 3, MaxBytes: math.MaxInt})
	c.ok(err, "first page")
	late := c.told(a) // committed after the traversal began: beyond its horizon
	raw, err := json.Marshal(first.Next)
	c.ok(err, "encode cursor")
	var cursor lifecycle.OutboxCursor
	c.ok(json.Unmarshal(raw, &cursor), "decode cursor")
	req := lifecycle.OutboxPageRequest{Study: a, MaxRecords: 100, MaxBytes: math.MaxInt, Cursor: &cursor}
	rest, err := c.b.ListOutboxPage(c.ctx, req)
	c.ok(err, "continue from a decoded cursor")
	again, err := c.b.ListOutboxPage(c.ctx, req)
	c.ok(err, "continue again from the same cursor")
	if got := bySeq(append(first.Records, rest.Records...)); !slices.Equal(got, want) || rest.Next != nil {
		c.Errorf("traversal begun before a new record: want exactly %v and no continuation, got %v (next %+v)", want, got, rest.Next)
	}
	if !slices.Equal(bySeq(again.Records), bySeq(rest.Records)) {
		c.Errorf("the same cursor gave different pages: %v then %v", bySeq(rest.Records), bySeq(again.Records))
	}
	if all, _ := c.pageAll(a, 100, math.MaxInt); len(all) != 8 || all[7].Key != late {
		c.Errorf("a new traversal must include the record committed later")
	}
}

func checkOutboxPageBytes(c *checker) {
	s := c.study(defaultSpec)
	var want []lifecycle.OutboxKey
	largest := 0
	for i := range 6 {
		tok := c.running(s, "a")
		intent := lifecycle.FinalizationIntent{Kind: "tell", Data: json.RawMessage(`"` + strings.Repeat("x", 100*(i%3)) + `"`)}
		key, err := c.b.TerminalWithIntent(c.ctx, complete(tok, 1), intent)
		c.ok(err, "terminal with intent")
		want = append(want, key)
		n, err := lifecycle.RecordSize(c.outbox(key))
		c.ok(err, "record size")
		largest = max(largest, n)
	}
	for _, budget := range []int{largest, largest + 1, 2*largest - 1, 3 * largest} {
		all, _ := c.pageAll(s, 1000, uint64(budget))
		if got := bySeq(all); !slices.Equal(got, want) {
			c.Errorf("byte-bounded traversal at %d bytes: want %v, got %v", budget, want, got)
		}
	}
	firstSize, err := lifecycle.RecordSize(c.outbox(want[0]))
	c.ok(err, "record size")
	before := c.snapshot(s)
	_, err = c.b.ListOutboxPage(c.ctx, lifecycle.OutboxPageRequest{Study: s, MaxRecords: 10, MaxBytes: uint64(firstSize) - 1})
	c.wantKind(err, lifecycle.KindResourceLimit, "a page whose first record cannot fit max_bytes")
	c.unchanged(before, "a refused page", s)
}

func checkOutboxPageLimits(c *checker) {
	s := c.study(defaultSpec)
	c.told(s)
	for _, tc := range []struct {
		name              string
		records, maxBytes uint64
	}{
		{"zero max_records", 0, 1 << 20},
		{"zero max_bytes", 10, 0},
		{"unrepresentable max_records", math.MaxUint64, 1 << 20},
		{"unrepresentable max_bytes", 10, 1 << 63},
	} {
		_, err := c.b.ListOutboxPage(c.ctx, lifecycle.OutboxPageRequest{Study: s, MaxRecords: tc.records, MaxBytes: tc.maxBytes})
		c.wantKind(err, lifecycle.KindResourceLimit, "a page request with "+tc.name)
	}
	_, err := c.b.ListOutboxPage(c.ctx, lifecycle.OutboxPageRequest{Study: "no-such-study", MaxRecords: 1, MaxBytes: 1 << 20})
	c.wantKind(err, lifecycle.KindNotFound, "a page of an unknown study")
}

func checkOutboxPageCursor(c *checker) {
	a, b := c.study(defaultSpec), c.study(defaultSpec)
	for range 3 {
		c.told(a)
		c.told(b)
	}
	page, err := c.b.ListOutboxPage(c.ctx, lifecycle.OutboxPageRequest{Study: a, MaxRecords: 1, MaxBytes: math.MaxInt})
	c.ok(err, "first page")
	if page.Next == nil {
		c.Fatalf("one record of three: want a continuation")
	}
	good := *page.Next
	for _, tc := range []struct {
		name  string
		study lifecycle.StudyID
		edit  func(*lifecycle.OutboxCursor)
	}{
		{"another study's cursor", b, func(*lifecycle.OutboxCursor) {}},
		{"a cursor claiming another study", a, func(k *lifecycle.OutboxCursor) { k.Study = b }},
		{"a horizon beyond the study", a, func(k *lifecycle.OutboxCursor) { k.Horizon += 10 }},
		{"a position beyond the horizon", a, func(k *lifecycle.OutboxCursor) { k.AfterSeq = k.Horizon + 1 }},
		{"a key not at its position", a, func(k *lifecycle.OutboxCursor) { k.AfterKey.Epoch++ }},
		{"a missing position", a, func(k *lifecycle.OutboxCursor) { k.AfterSeq = 0 }},
	} {
		cur := good
		tc.edit(&cur)
		_, err := c.b.ListOutboxPage(c.ctx, lifecycle.OutboxPageRequest{Study: tc.study, MaxRecords: 5, MaxBytes: math.MaxInt, Cursor: &cur})
		c.wantKind(err, lifecycle.KindConflict, "continuing with "+tc.name)
	}
}

func checkOutboxCompleteIdempotent(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, external("a", `1`))
	eff := lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "a"}}
	c.ok(c.b.CompleteOutboxEffect(c.ctx, eff), "complete")
	once := c.snapshot(s, key.Trial)
	for range 2 {
		c.ok(c.b.CompleteOutboxEffect(c.ctx, eff), "complete again")
	}
	c.unchanged(once, "repeated completions", s, key.Trial)
	if rec := c.outbox(key); len(rec.Completed) != 1 {
		c.Errorf("one effect completed three times: %d completions recorded", len(rec.Completed))
	}
}

func checkOutboxEffectKinds(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, external("a", `1`), replacement("retry", bigBudget))
	before := c.snapshot(s, key.Trial)
	err := c.b.CompleteOutboxEffect(c.ctx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "retry"}})
	c.wantKind(err, lifecycle.KindConflict, "acknowledging a replacement effect externally")
	_, err = c.b.CreateReplacement(c.ctx, lifecycle.OutboxEffectKey{Outbox: key, Name: "a"})
	c.wantKind(err, lifecycle.KindConflict, "creating a replacement for an external effect")
	c.unchanged(before, "effects completed the wrong way", s, key.Trial)
	k2 := c.told(s)
	c.advance(k2, lifecycle.PhaseCallbacks)
	_, err = c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: k2, Phase: lifecycle.PhaseEffects, Effects: []lifecycle.OutboxEffect{{Name: "r", Kind: lifecycle.EffectReplacement}}})
	c.wantKind(err, lifecycle.KindInvalid, "publishing a replacement effect without a spec")
	_, err = c.b.AdvanceOutbox(c.ctx, lifecycle.OutboxAdvanceRequest{Key: k2, Phase: lifecycle.PhaseCallbacks, Effects: []lifecycle.OutboxEffect{external("a", `1`)}})
	c.wantKind(err, lifecycle.KindInvalid, "publishing effects outside the effects phase")
}

func checkOutboxReplacementIdempotent(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, replacement("retry", bigBudget))
	eff := lifecycle.OutboxEffectKey{Outbox: key, Name: "retry"}
	count := c.inspectStudy(s).Trials
	first, err := c.b.CreateReplacement(c.ctx, eff)
	c.ok(err, "create replacement")
	if first.Status != lifecycle.ReplacementCreated || first.Trial == "" || first.Number != count {
		c.Fatalf("create replacement: want a created trial numbered %d, got %+v", count, first)
	}
	for range 2 {
		again, err := c.b.CreateReplacement(c.ctx, eff)
		c.ok(err, "replay create replacement")
		if again != first {
			c.Errorf("replayed replacement: want %+v, got %+v", first, again)
		}
	}
	if n := c.inspectStudy(s).Trials; n != count+1 {
		c.Errorf("one replacement created %d trials", n-count)
	}
	tr := c.inspect(first.Trial)
	if tr.Lease.State != lifecycle.TrialWaiting || !tr.Managed || tr.ReplacementOf == nil || *tr.ReplacementOf != eff ||
		len(tr.Params) != 1 || tr.Params[0].Value != 0.25 || !hasBlob(tr.States, trialBlob("retry", "retry.count", 1, "1")) {
		c.Errorf("replacement trial does not match its spec: %+v", tr)
	}
	rec := c.outbox(key)
	if len(rec.Completed) != 1 || rec.Completed[0].Replacement == nil || *rec.Completed[0].Replacement != first {
		c.Errorf("replacement effect completion: %+v", rec.Completed)
	}
	c.advance(key, lifecycle.PhaseDone)
	c.claim(first.Trial, "next-worker")
}

func checkOutboxReplacementBudget(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, replacement("retry", 1))
	before := c.inspectStudy(s).Trials
	eff := lifecycle.OutboxEffectKey{Outbox: key, Name: "retry"}
	for range 2 {
		out, err := c.b.CreateReplacement(c.ctx, eff)
		c.ok(err, "create replacement over budget")
		if out != (lifecycle.ReplacementOutcome{Status: lifecycle.ReplacementExhausted}) {
			c.Errorf("replacement over budget: want a bare exhausted outcome, got %+v", out)
		}
	}
	if n := c.inspectStudy(s).Trials; n != before {
		c.Errorf("an exhausted replacement consumed %d numbers", n-before)
	}
	c.advance(key, lifecycle.PhaseDone)
}

func checkOutboxPutFinalized(c *checker) {
	s := c.study(defaultSpec)
	run := c.running(s, "a")
	put := func(tr lifecycle.TrialID, b lifecycle.StateBlob) error {
		return c.b.PutFinalizedState(c.ctx, lifecycle.FinalizedStateRequest{Trial: tr, State: b})
	}
	c.wantKind(put(run.Trial, trialBlob("final", "k", 1, "v")), lifecycle.KindConflict, "finalized state on a running trial")
	done := c.running(s, "a")
	c.ok(c.b.Terminal(c.ctx, complete(done, 1)), "terminal")
	c.ok(put(done.Trial, trialBlob("final", "k", 1, "v1")), "finalized state")
	once := c.snapshot(s, done.Trial)
	c.ok(put(done.Trial, trialBlob("final", "k", 1, "v1")), "the same finalized state again")
	c.unchanged(once, "repeating the same finalized state", s, done.Trial)
	c.ok(put(done.Trial, trialBlob("final", "k", 1, "v2")), "a different finalized value")
	if !hasBlob(c.inspect(done.Trial).States, trialBlob("final", "k", 1, "v2")) {
		c.Errorf("a different finalized value did not replace the old one")
	}
	before := c.snapshot(s, done.Trial, run.Trial)
	c.wantKind(put(done.Trial, trialBlob("final", "k2", 1, "v3")), lifecycle.KindIncompatible, "finalized state of another kind")
	c.wantKind(put(done.Trial, studyBlob("seam", "k", 1, "v")), lifecycle.KindConflict, "finalized state in the study scope")
	c.wantKind(put(done.Trial, constraintsBlob(1, 2)), lifecycle.KindConflict, "finalized constraint state")
	c.wantKind(put("no-such-trial", trialBlob("final", "k", 1, "v")), lifecycle.KindNotFound, "finalized state on an unknown trial")
	c.unchanged(before, "refused finalized state", s, done.Trial, run.Trial)
}

// checkOutboxOperation replays idempotent operations with and without an
// operation id: the id is correlation, so the answers must not move.
func checkOutboxOperation(c *checker) {
	s := c.study(defaultSpec)
	key := c.atEffects(s, external("a", `1`), replacement("retry", bigBudget))
	opCtx := lifecycle.WithOperation(c.ctx, "op-42")
	if got := lifecycle.OperationFrom(opCtx); got != "op-42" {
		c.Errorf("OperationFrom: want op-42, got %q", got)
	}
	eff := lifecycle.OutboxEffectKey{Outbox: key, Name: "retry"}
	withOp, err := c.b.CreateReplacement(opCtx, eff)
	c.ok(err, "create replacement with an operation")
	without, err := c.b.CreateReplacement(c.ctx, eff)
	c.ok(err, "create replacement without one")
	if withOp != without {
		c.Errorf("the operation id changed the replacement outcome: %+v vs %+v", withOp, without)
	}
	c.ok(c.b.CompleteOutboxEffect(opCtx, lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "a"}}), "complete with an operation")
	c.ok(c.b.CompleteOutboxEffect(lifecycle.WithOperation(c.ctx, lifecycle.NoOperation), lifecycle.OutboxEffectCompletion{Effect: lifecycle.OutboxEffectKey{Outbox: key, Name: "a"}}), "complete again as recovery")
	phase, err := c.b.AdvanceOutbox(opCtx, lifecycle.OutboxAdvanceRequest{Key: key, Phase: lifecycle.PhaseDone})
	if err != nil || phase != lifecycle.PhaseDone {
		c.Errorf("advance with an operation: want done, got %s, %v", phase, err)
	}
}
