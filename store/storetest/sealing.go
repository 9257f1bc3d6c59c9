package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// Sealing is one fresh sealing journal and what the sealing checks need
// beside it. The checks reach the decorator only through these, so that a
// deliberately broken decorator can be plugged in to prove they fail.
type Sealing struct {
	// Journal is the sealing decorator (Seals() true).
	Journal store.Journal
	// Inner is the store it wraps, read with no key: its reads return the
	// stored (sealed) bytes.
	Inner store.Journal
	// Seals is the rule: whether field of kind is sealed.
	Seals func(kind, field string) bool
	// EraseCase destroys the case's scope key.
	EraseCase func(ctx context.Context, c store.CaseID) error
	// ErasedFields names the fields of r (a record read through Journal)
	// that read as erased.
	ErasedFields func(ctx context.Context, r store.Record) ([]string, error)
	// Nonce returns the nonce of a sealed field's stored JSON value.
	Nonce func(value []byte) ([]byte, error)
}

// SealingHarness opens fresh sealing journals, each over a fresh store.
type SealingHarness struct {
	Open func(tb testing.TB) Sealing
}

type sealingCheck struct {
	name string
	fn   func(t *T, s Sealing)
}

// The sealing checks, in the order they run. Their invariant is the part
// before the slash, as for the main suite.
var sealingChecks = []sealingCheck{
	{"sealing/routing-and-index-fields-clear", checkRoutingClear},
	{"sealing/caller-data-sealed", checkCallerDataSealed},
	{"sealing/opens-exactly", checkOpensExactly},
	{"exactly-once/under-sealing", checkExactlyOnceSealed},
	{"sealing/fresh-nonces", checkFreshNonces},
	{"sealing/envelope-moved-is-corrupt", checkEnvelopeMoved},
	{"sealing/envelope-damaged-is-corrupt", checkEnvelopeDamaged},
	{"sealing/erased-reads", checkErasedReads},
	{"sealing/verify-without-keys", checkVerifyWithoutKeys},
	{"sealing/restore-not-sealed-twice", checkRestoreNotSealedTwice},
}

// SealingChecks lists the sealing checks' names.
func SealingChecks() []string {
	out := make([]string, len(sealingChecks))
	for i, c := range sealingChecks {
		out[i] = c.name
	}
	return out
}

func runSealingOne(tb testing.TB, h SealingHarness, c sealingCheck) []string {
	return runOne(tb, Harness{}, check{name: c.name, fn: func(t *T) { c.fn(t, h.Open(tb)) }})
}

// RunSealing runs the sealing checks as subtests of t.
func RunSealing(t *testing.T, h SealingHarness) {
	for _, c := range sealingChecks {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range runSealingOne(t, h, c) {
				t.Errorf("[%s] %s", invariant(c.name), f)
			}
		})
	}
}

// CheckSealing runs the sealing checks and reports, without failing tb.
func CheckSealing(tb testing.TB, h SealingHarness) Report {
	var r Report
	for _, c := range sealingChecks {
		for _, f := range runSealingOne(tb, h, c) {
			r.Violations = append(r.Violations, Violation{Invariant: invariant(c.name), Check: c.name, Detail: f})
		}
		r.Checked = append(r.Checked, c.name)
	}
	return r
}

// sample is one record of every shape the store reads, plus caller kinds.
func sample(run store.RunID, c store.CaseID, secret string) []store.Append {
	step := uint32(4)
	k := key("effect-" + run.String())
	return []store.Append{
		{Run: run, Case: c, Kind: store.KindRunAdmitted, Fields: []byte(fmt.Sprintf(`{"admission_key":"adm-%s","source":"src-a","input":%q}`, run, secret))},
		{Run: run, Case: c, Step: &step, Kind: store.KindEffectStarted, EffectKey: &k, Fields: []byte(fmt.Sprintf(`{"request":%q}`, secret))},
		{Run: run, Case: c, Step: &step, Phase: store.Compensating, Kind: "StepDone", Fields: []byte(fmt.Sprintf(`{"output":{"n":18446744073709551615,"s":%q}}`, secret))},
		{Run: run, Case: c, Kind: store.KindRunSuspended, Fields: []byte(fmt.Sprintf(`{"awaiting":"event","event":"approval","note":%q}`, secret))},
	}
}

func rawFields(t *T, raw []byte) map[string]canon.Value {
	b, err := store.DecodeBody(raw)
	if err != nil {
		t.Fatalf("stored bytes do not decode: %v", err)
	}
	v, err := canon.Parse(b.Fields)
	if err != nil {
		t.Fatalf("stored fields do not parse: %v", err)
	}
	out := map[string]canon.Value{}
	for _, m := range v.Members {
		out[m.Key] = m.Value
	}
	return out
}

func (t *T) read(j store.Journal, run store.RunID) []store.Record {
	recs, err := j.Read(t.ctx, run, 1)
	if err != nil {
		t.Fatalf("Read(%s): %v", run, err)
	}
	return recs
}

func checkRoutingClear(t *T, s Sealing) {
	run, c := store.NewRunID(), store.NewCaseID()
	in := sample(run, c, "s3cret-routing")
	t.append(s.Journal, 1, in...)
	stored := t.read(s.Inner, run)
	if len(stored) != len(in) {
		t.Fatalf("stored %d records, appended %d", len(stored), len(in))
	}
	for i, r := range stored {
		a := in[i]
		if r.Kind != a.Kind || r.Case != a.Case || r.Phase != a.Phase || r.Run != run || r.Seq != store.Seq(i+1) {
			t.Errorf("seq %d: stored routing (kind %q case %s phase %q) differs from appended (%q %s %q)", r.Seq, r.Kind, r.Case, r.Phase, a.Kind, a.Case, a.Phase)
		}
		if (r.Step == nil) != (a.Step == nil) || r.Step != nil && *r.Step != *a.Step {
			t.Errorf("seq %d: stored step differs from appended", r.Seq)
		}
		if (r.EffectKey == nil) != (a.EffectKey == nil) || r.EffectKey != nil && *r.EffectKey != *a.EffectKey {
			t.Errorf("seq %d: stored effect_key is not the caller's in the clear: %s", r.Seq, r.Raw)
		}
		want, _ := canon.Parse(a.Fields)
		got := rawFields(t, r.Raw)
		for _, m := range want.Members {
			if s.Seals(a.Kind, m.Key) {
				continue
			}
			if g, ok := got[m.Key]; !ok || !bytes.Equal(g.Marshal(), m.Value.Marshal()) {
				t.Errorf("seq %d: field %q the store reads is not stored in the clear: %s", r.Seq, m.Key, r.Raw)
			}
		}
	}
	// Every index answers from the stored bytes with no key.
	if got, ok, err := s.Inner.AdmittedAs(t.ctx, "adm-"+run.String()); err != nil || !ok || got != run {
		t.Errorf("AdmittedAs on the inner store = %s, %v, %v; want %s", got, ok, err, run)
	}
	if runs, err := s.Inner.CaseRuns(t.ctx, c, nil, 10); err != nil || len(runs) != 1 || runs[0] != run {
		t.Errorf("CaseRuns on the inner store = %v, %v", runs, err)
	}
	ws, err := s.Inner.WaitingRuns(t.ctx, 100)
	found := false
	for _, w := range ws {
		found = found || w.Run == run && w.Reason.Event == "approval"
	}
	if err != nil || !found {
		t.Errorf("WaitingRuns on the inner store lacks the suspended run: %v, %v", ws, err)
	}
	from, err := s.Inner.RecentRunsFrom(t.ctx, "src-a", nil, 10)
	if err != nil || len(from) != 1 || from[0].Run != run {
		t.Errorf("RecentRunsFrom(source) on the inner store = %v, %v", from, err)
	}
	t.append(s.Journal, 1, store.Append{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded","summary":"s3cret-routing"}`)})
	if n, err := s.Inner.CountByOutcome(t.ctx, "succeeded"); err != nil || n != 1 {
		t.Errorf("CountByOutcome on the inner store = %d, %v; want 1", n, err)
	}
}

func checkCallerDataSealed(t *T, s Sealing) {
	run, c := store.NewRunID(), store.NewCaseID()
	const secret = "s3cret-caller-data"
	in := append(sample(run, c, secret), store.Append{Run: run, Kind: "Opaque", Fields: []byte(`{"a":1,"b":[true,null],"c":"s3cret-caller-data"}`)})
	t.append(s.Journal, 1, in...)
	for _, r := range t.read(s.Inner, run) {
		if bytes.Contains(r.Raw, []byte(secret)) {
			t.Errorf("seq %d: the caller's data is stored in the clear: %s", r.Seq, r.Raw)
		}
		a := in[r.Seq-1]
		want, _ := canon.Parse(a.Fields)
		got := rawFields(t, r.Raw)
		for _, m := range want.Members {
			if !s.Seals(a.Kind, m.Key) {
				continue
			}
			g, ok := got[m.Key]
			if !ok || g.Kind != canon.String || bytes.Equal(g.Marshal(), m.Value.Marshal()) {
				t.Errorf("seq %d: field %q of kind %s is not sealed: %s", r.Seq, m.Key, a.Kind, r.Raw)
			}
		}
	}
	if !s.Seals("Opaque", "a") || !s.Seals(store.KindEffectStarted, "request") {
		t.Errorf("the rule leaves fields of kinds the store does not read in the clear")
	}
	if !s.Journal.Seals() {
		t.Errorf("Seals() is false on a sealing journal: a restore would not know it rewrites payloads")
	}
}

func checkOpensExactly(t *T, s Sealing) {
	run, c := store.NewRunID(), store.NewCaseID()
	in := sample(run, c, "s3cret-open")
	back := t.append(s.Journal, 1, in...)
	read := t.read(s.Journal, run)
	hist, err := s.Journal.CaseHistory(t.ctx, c, 100)
	if err != nil {
		t.Fatalf("CaseHistory: %v", err)
	}
	page, err := s.Journal.ReadPage(t.ctx, run, 2, 2)
	if err != nil {
		t.Fatalf("ReadPage: %v", err)
	}
	stored := t.read(s.Inner, run)
	for i, a := range in {
		want, _ := canon.Canonicalize(a.Fields)
		for what, got := range map[string]store.Record{"Append": back[i], "Read": read[i], "CaseHistory": hist[i]} {
			if !bytes.Equal(got.Fields, want) {
				t.Errorf("%s seq %d: fields = %s, want the appended %s", what, i+1, got.Fields, want)
			}
			if !bytes.Equal(got.Raw, stored[i].Raw) || got.Hash != stored[i].Hash {
				t.Errorf("%s seq %d: Raw/Hash are not the stored bytes", what, i+1)
			}
		}
	}
	if len(page) != 2 || !bytes.Equal(page[0].Fields, read[1].Fields) {
		t.Errorf("ReadPage does not open like Read")
	}
	if !strings.Contains(string(read[2].Fields), "18446744073709551615") {
		t.Errorf("an integer beyond 2^53 did not survive sealing exactly: %s", read[2].Fields)
	}
}

func checkExactlyOnceSealed(t *T, s Sealing) {
	run := store.NewRunID()
	k := key("once")
	first := store.Append{Run: run, Kind: store.KindEffectStarted, EffectKey: &k, Fields: []byte(`{"request":"a"}`)}
	t.append(s.Journal, 1, first)
	second := first
	second.Fields = []byte(`{"request":"b"}`)
	_, err := s.Journal.Append(t.ctx, 1, []store.Append{second})
	expect[*store.DuplicateEffectError](t, err, "a second EffectStarted for one key through the sealing store")
	// The key stored must be the caller's, so a writer with no key ring
	// (or another process) is held to the same exactly-once.
	_, err = s.Inner.Append(t.ctx, 1, []store.Append{second})
	expect[*store.DuplicateEffectError](t, err, "a second EffectStarted for one key written beside the sealing store")
	if h := t.head(s.Inner, run); h.Seq != 1 {
		t.Errorf("head after refused duplicates = %d, want 1", h.Seq)
	}
}

func envelopes(t *T, s Sealing, recs []store.Record) [][]byte {
	var out [][]byte
	for _, r := range recs {
		b, _ := store.DecodeBody(r.Raw)
		for k, v := range rawFields(t, r.Raw) {
			if s.Seals(b.Kind, k) {
				out = append(out, v.Marshal())
			}
		}
	}
	return out
}

func checkFreshNonces(t *T, s Sealing) {
	run, c := store.NewRunID(), store.NewCaseID()
	var batch []store.Append
	for i := 0; i < 16; i++ {
		batch = append(batch, store.Append{Run: run, Case: c, Kind: "Same", Fields: []byte(`{"x":"same plaintext","y":"same plaintext"}`)})
	}
	t.append(s.Journal, 1, batch...)
	seen := map[string]bool{}
	envs := envelopes(t, s, t.read(s.Inner, run))
	if len(envs) != 32 {
		t.Fatalf("found %d sealed fields, want 32", len(envs))
	}
	for _, e := range envs {
		n, err := s.Nonce(e)
		if err != nil {
			t.Fatalf("envelope %.40s does not parse: %v", e, err)
		}
		if seen[string(n)] {
			t.Fatalf("nonce %x used twice under one scope", n)
		}
		seen[string(n)] = true
	}
}

// restoreAs writes a record whose own fields are fields at run's next seq,
// bypassing sealing (a restored append), as an attacker with database
// access or a careless copy would.
func restoreAs(t *T, j store.Journal, run store.RunID, c store.CaseID, kind string, fields []byte) {
	h := t.head(j, run)
	raw, err := store.EncodeBody(store.Body{Seq: h.Seq + 1, Run: run, Case: c, Epoch: 1, V: store.RecordVersion, Kind: kind, Fields: fields})
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	t.append(j, 1, store.Append{Run: run, Raw: raw})
}

func (t *T) expectCorrupt(s Sealing, run store.RunID, what string) {
	_, err := s.Journal.Read(t.ctx, run, 1)
	if err == nil {
		t.Errorf("%s: read opened", what)
		return
	}
	var ce *store.CorruptError
	if !errors.As(err, &ce) {
		t.Errorf("%s: read failed with %v (%T), want a CorruptError (not erased, not unknown)", what, err, err)
	}
}

func checkEnvelopeMoved(t *T, s Sealing) {
	c := store.NewCaseID()
	a, b := store.NewRunID(), store.NewRunID()
	t.append(s.Journal, 1, store.Append{Run: a, Case: c, Kind: "Data", Fields: []byte(`{"payload":"for run a","other":"x"}`)})
	t.append(s.Journal, 1, store.Append{Run: b, Case: c, Kind: "Data", Fields: []byte(`{"payload":"for run b","other":"y"}`)})
	env := rawFields(t, t.read(s.Inner, a)[0].Raw)["payload"].Marshal()

	// Same tenant, case, seq and field; another run.
	other := store.NewRunID()
	restoreAs(t, s.Inner, other, c, "Data", []byte(`{"payload":`+string(env)+`}`))
	t.expectCorrupt(s, other, "an envelope moved to another run (same case, seq and field)")
	// Same run, another seq.
	restoreAs(t, s.Inner, a, c, "Data", []byte(`{"payload":`+string(env)+`}`))
	t.expectCorrupt(s, a, "an envelope moved to another seq of its run")
	// Same record position, another field.
	fresh := store.NewRunID()
	restoreAs(t, s.Inner, fresh, c, "Data", []byte(`{"other":`+string(env)+`}`))
	t.expectCorrupt(s, fresh, "an envelope moved to another field")
	// Another case's scope: the data key does not unwrap there.
	c2, moved := store.NewCaseID(), store.NewRunID()
	t.append(s.Journal, 1, store.Append{Run: store.NewRunID(), Case: c2, Kind: "Data", Fields: []byte(`{"payload":"c2"}`)})
	restoreAs(t, s.Inner, moved, c2, "Data", []byte(`{"payload":`+string(env)+`}`))
	t.expectCorrupt(s, moved, "an envelope moved to another case")
	// The untouched run b still opens.
	if recs := t.read(s.Journal, b); !strings.Contains(string(recs[0].Fields), "for run b") {
		t.Errorf("run b does not open after another run's envelope was moved: %s", recs[0].Fields)
	}
}

func checkEnvelopeDamaged(t *T, s Sealing) {
	c, a := store.NewCaseID(), store.NewRunID()
	t.append(s.Journal, 1, store.Append{Run: a, Case: c, Kind: "Data", Fields: []byte(`{"payload":"intact"}`)})
	var str string
	if err := json.Unmarshal(rawFields(t, t.read(s.Inner, a)[0].Raw)["payload"].Marshal(), &str); err != nil {
		t.Fatalf("stored payload is not a string: %v", err)
	}
	for i, pos := range []int{len(str) - 3, len(str) / 2, 10} {
		b := []byte(str)
		if b[pos] == 'A' {
			b[pos] = 'B'
		} else {
			b[pos] = 'A'
		}
		damaged, _ := json.Marshal(string(b))
		run := store.NewRunID()
		restoreAs(t, s.Inner, run, c, "Data", []byte(`{"payload":`+string(damaged)+`}`))
		t.expectCorrupt(s, run, fmt.Sprintf("an envelope with byte %d (case %d) changed", pos, i))
	}
}

func checkErasedReads(t *T, s Sealing) {
	gone, kept := store.NewCaseID(), store.NewCaseID()
	rg, rk := store.NewRunID(), store.NewRunID()
	t.append(s.Journal, 1, sample(rg, gone, "s3cret-gone")...)
	t.append(s.Journal, 1, sample(rk, kept, "s3cret-kept")...)
	if err := s.EraseCase(t.ctx, gone); err != nil {
		t.Fatalf("erase case: %v", err)
	}
	for _, read := range []func() ([]store.Record, error){
		func() ([]store.Record, error) { return s.Journal.Read(t.ctx, rg, 1) },
		func() ([]store.Record, error) { return s.Journal.CaseHistory(t.ctx, gone, 100) },
		func() ([]store.Record, error) { return s.Journal.ReadPage(t.ctx, rg, 1, 100) },
	} {
		recs, err := read()
		if err != nil {
			t.Fatalf("reading an erased case failed as a whole: %v", err)
		}
		if len(recs) != 4 {
			t.Fatalf("reading an erased case returned %d records, want 4", len(recs))
		}
		for _, r := range recs {
			if bytes.Contains(r.Fields, []byte("s3cret-gone")) {
				t.Errorf("seq %d: erased data read as plaintext: %s", r.Seq, r.Fields)
			}
			names, err := s.ErasedFields(t.ctx, r)
			if err != nil {
				t.Fatalf("erased fields of seq %d: %v", r.Seq, err)
			}
			b, _ := store.DecodeBody(r.Raw)
			var want []string
			for k := range rawFields(t, r.Raw) {
				if s.Seals(b.Kind, k) {
					want = append(want, k)
				}
			}
			if len(names) != len(want) || len(want) == 0 {
				t.Errorf("seq %d (%s): erased fields %v, want the sealed fields %v", r.Seq, b.Kind, names, want)
			}
		}
	}
	recs := t.read(s.Journal, rk)
	if !bytes.Contains(recs[0].Fields, []byte("s3cret-kept")) {
		t.Errorf("another case's payload no longer opens after an erasure: %s", recs[0].Fields)
	}
	if err := s.EraseCase(t.ctx, gone); err != nil {
		t.Errorf("erasing a case twice is not idempotent: %v", err)
	}
	// Clear fields still read; the admission index still answers.
	if got, ok, err := s.Journal.AdmittedAs(t.ctx, "adm-"+rg.String()); err != nil || !ok || got != rg {
		t.Errorf("AdmittedAs after erasure = %s, %v, %v", got, ok, err)
	}
}

func checkVerifyWithoutKeys(t *T, s Sealing) {
	gone := store.NewCaseID()
	run := store.NewRunID()
	t.append(s.Journal, 1, sample(run, gone, "s3cret-verify")...)
	before := t.head(s.Inner, run)
	t.append(s.Journal, 1, conclude(run, "succeeded"))
	leaf := t.sealed(s.Journal, run, 1, "succeeded")
	if err := s.EraseCase(t.ctx, gone); err != nil {
		t.Fatalf("erase: %v", err)
	}
	for name, j := range map[string]store.Journal{"inner store (no key)": s.Inner, "sealing store after erasure": s.Journal} {
		got, err := j.Verify(t.ctx, run)
		if err != nil || got != leaf {
			t.Errorf("Verify through the %s = %s, %v; want %s", name, got, err, leaf)
		}
		inc, err := j.InclusionProof(t.ctx, run)
		if err != nil || inc == nil || inc.Leaf != leaf {
			t.Errorf("InclusionProof through the %s = %+v, %v", name, inc, err)
		}
	}
	var v = store.NewChainVerifier(run)
	for _, r := range t.read(s.Inner, run) {
		if err := v.Next(r); err != nil {
			t.Errorf("the chain of stored bytes does not verify: %v", err)
		}
	}
	if v.Head().Seq != before.Seq+1 || v.Head().Hash != leaf {
		t.Errorf("verified head %+v, want seq %d hash %s", v.Head(), before.Seq+1, leaf)
	}
}

func checkRestoreNotSealedTwice(t *T, s Sealing) {
	run, c := store.NewRunID(), store.NewCaseID()
	// Without the admission, whose key a second run could not claim.
	t.append(s.Journal, 1, sample(run, c, "s3cret-restore")[1:]...)
	stored := t.read(s.Inner, run)
	// Write the recorded bytes again as restored appends through the sealing
	// store (renumbered into a fresh run, since bytes name their run), and
	// read back what was stored: it must be the bytes handed in.
	target := store.NewRunID()
	var want [][]byte
	for i, r := range stored {
		b, _ := store.DecodeBody(r.Raw)
		b.Run, b.Seq = target, store.Seq(i+1)
		raw, err := store.EncodeBody(b)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		want = append(want, raw)
		t.append(s.Journal, 1, store.Append{Run: target, Raw: raw})
	}
	for i, r := range t.read(s.Inner, target) {
		if !bytes.Equal(r.Raw, want[i]) {
			t.Errorf("seq %d: a restored record was rewritten by the sealing store:\n got %s\nwant %s", r.Seq, r.Raw, want[i])
		}
	}
}
