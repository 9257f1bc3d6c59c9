package disclosure

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/runseal/runseal/store"
)

// rehashLast edits the raw bytes of the last record of an unsealed run
// and re-hashes its line, so the chain is intact and only the rule the
// edit breaks can catch it: an attacker's edit, not a corruption.
func rehashLast(t *testing.T, pkg []byte, run store.RunID, from, to string) []byte {
	t.Helper()
	ls := lines(pkg)
	for i, l := range ls {
		if !bytes.Contains(l, []byte(`"run":"`+run.String()+`","unsealed":true}`)) {
			continue
		}
		var blk runBlock
		if err := parseRunBlock(bytes.TrimSuffix(l, []byte("\n")), KindPackageRun, true, &blk); err != nil {
			t.Fatal(err)
		}
		last := i + int(blk.Records)
		prev := store.ZeroDigest
		if blk.Records > 1 {
			h, _, err := parseRecordLine(bytes.TrimSuffix(ls[last-1], []byte("\n")))
			if err != nil {
				t.Fatal(err)
			}
			prev = h
		}
		_, raw, err := parseRecordLine(bytes.TrimSuffix(ls[last], []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte(from)) {
			t.Fatalf("the last record of %s has no %q: %s", run, from, raw)
		}
		raw = bytes.Replace(raw, []byte(from), []byte(to), 1)
		ls[last] = appendRecordLine(nil, store.ChainHash(prev, raw), raw)
		return join(ls)
	}
	t.Fatalf("no unsealed block of run %s", run)
	return nil
}

// Issue 18 items 1 and 2: spec/records.md gives the epoch range 1 to 2^62
// and "v" MUST be 1. A record outside them, its chain re-hashed, must not
// verify sound; it is a record_body finding.
func TestVerify_BodyRulesRehashedChain(t *testing.T) {
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.C}})
	opts := w.k.options()
	mustSound(t, verifyBytes(t, pkg, opts))
	for _, c := range []struct{ name, from, to string }{
		{"epoch 0", `"epoch":3`, `"epoch":0`},
		{"epoch 2^62+1", `"epoch":3`, fmt.Sprintf(`"epoch":%d`, uint64(1)<<62+1)},
		{"v 0", `"v":1`, `"v":0`},
		{"v 2", `"v":1`, `"v":2`},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := rehashLast(t, pkg, w.C, c.from, c.to)
			rep := verifyBytes(t, bad, opts)
			if rep.Verdict != NotSound || len(rep.Findings) == 0 || rep.Findings[0].Check != CheckRecordBody {
				t.Fatalf("verdict %s, want not_sound with %s first: %s", rep.Verdict, CheckRecordBody, summary(rep))
			}
		})
	}
	// The edge values stay sound: 2^62 is the highest epoch a lease grants.
	edge := rehashLast(t, pkg, w.C, `"epoch":3`, fmt.Sprintf(`"epoch":%d`, uint64(1)<<62))
	rep := verifyBytes(t, edge, opts)
	for _, f := range rep.Findings {
		if f.Check == CheckRecordBody {
			t.Fatalf("epoch 2^62 refused: %s", summary(rep))
		}
	}
}

// Issue 29 item 3: spec/records.md section 5 checks until, when present,
// whatever awaiting says, and "" is not a timestamp: a suspension awaiting
// an event with "until":"" is a record_body finding, as any other until
// outside the timestamp profile is.
func TestVerify_SuspendedEventWithEmptyUntilIsRecordBody(t *testing.T) {
	const run = "01JC000000000000000000000A"
	body := func(until string) []byte {
		return []byte(`{"awaiting":"event","epoch":1,"event":"approval","kind":"RunSuspended","run":"` + run + `","seq":1` + until + `,"v":1}`)
	}
	if _, _, err := decodeRecordBody(body("")); err != nil {
		t.Fatalf("awaiting event without until: %v", err)
	}
	if _, _, err := decodeRecordBody(body(`,"until":"2030-01-02T03:04:05Z"`)); err != nil {
		t.Fatalf("awaiting event with a deadline: %v", err)
	}
	if _, _, err := decodeRecordBody(body(`,"until":""`)); err == nil {
		t.Fatal(`awaiting event with "until":"" decodes`)
	}
	// In a package, the last record re-hashed so that only the body rule
	// can tell; the statement then differs too, but the body comes first.
	w := newWorld(t)
	pkg := w.pkg(t, Selection{Runs: []store.RunID{w.C}})
	opts := w.k.options()
	const concl = `"epoch":3,"kind":"RunConcluded","outcome":"failed","run":"01JC000000000000000000000C","seq":3,"v":1`
	const susp = `"awaiting":"event","epoch":3,"event":"approval","kind":"RunSuspended","run":"01JC000000000000000000000C","seq":3`
	for _, c := range []struct {
		until string
		first string
	}{
		{``, CheckStatement},
		{`,"until":"2030-01-02T03:04:05Z"`, CheckStatement},
		{`,"until":""`, CheckRecordBody},
	} {
		rep := verifyBytes(t, rehashLast(t, pkg, w.C, concl, susp+c.until+`,"v":1`), opts)
		if rep.Verdict != NotSound || rep.Findings[0].Check != c.first {
			t.Errorf("until %q: %s, want the first finding %s", c.until, summary(rep), c.first)
		}
	}
}
