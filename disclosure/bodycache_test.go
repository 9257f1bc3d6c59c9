package disclosure

import (
	"reflect"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestBodyCache_NeverVouchesForOtherBytes decodes a sequence of bodies
// through one cache, each beside a decode without one: a case id, a run id
// or a kind taken from the cache must be the one those very bytes decode
// to, so ids that differ from the cached one in a byte, in letter case, or
// are zero, kinds that differ from the cached ones (more kinds than it
// holds, so some are forgotten), and RunConcluded fields beside the memo's,
// must decode, or fail, exactly as without it.
func TestBodyCache_NeverVouchesForOtherBytes(t *testing.T) {
	const run = `"run":"01JC000000000000000000000A"`
	body := func(caseID, kind string) []byte {
		b := `{`
		if caseID != "" {
			b += `"case":"` + caseID + `",`
		}
		return []byte(b + `"epoch":1,"kind":"` + kind + `",` + run + `,"seq":1,"v":1}`)
	}
	var bodies [][]byte
	for _, c := range []string{
		"01JC0000000000000000000CAS", "01JC0000000000000000000CAS", // a hit
		"01JC0000000000000000000CAT",  // one byte off
		"01jc0000000000000000000cat",  // lower case: not the canonical spelling
		"00000000000000000000000000",  // the zero id names no case
		"01JC0000000000000000000CAT",  // back to a valid one
		"01JC0000000000000000000CA",   // too short
		"01JC0000000000000000000CATT", // too long
		"01JC0000000000000000000CAI",  // I is not Crockford base32
		"",
	} {
		bodies = append(bodies, body(c, "Note"))
	}
	for _, k := range []string{"A", "B", "C", "D", "E", "A", "Note", "note", "B", "Not", "Notes", "No te", "E", "Step.Completed-1", "Step.Completed-1"} {
		bodies = append(bodies, body("01JC0000000000000000000CAS", k))
	}
	// RunConcluded fields: the memo of the last accepted ones must serve
	// only the same bytes, never a sibling outcome, a refused one, or the
	// same outcome beside another member.
	for _, o := range []string{`"outcome":"succeeded"`, `"outcome":"succeeded"`, `"outcome":"succeedeD"`, `"outcome":"succeeded"`,
		`"outcome":"failed"`, `"outcome":"succeeded","reason":"x"`, `"outcome":""`, `"outcome":"succeeded"`, `"outcome":7`,
		`"note":"a","outcome":"failed"`, `"outcome":"failed"`} {
		bodies = append(bodies, []byte(`{"epoch":1,"kind":"RunConcluded",`+o+`,`+run+`,"seq":1,"v":1}`))
	}
	var cache bodyCache
	accepted, refused := 0, 0
	for _, raw := range bodies {
		want, wantFacts, werr := decodeRecordBody(raw)
		got, gotFacts, err := decodeRecordBodyCached(raw, &cache)
		if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotFacts, wantFacts) {
			t.Fatalf("%s: with the cache %+v %v, without %+v %v", raw, got, err, want, werr)
		}
		if err == nil {
			accepted++
		} else {
			refused++
		}
	}
	if accepted < 10 || refused < 5 {
		t.Fatalf("%d accepted, %d refused: the sequence does not exercise both", accepted, refused)
	}
}

// TestBodyID_SameRuleAsStore: a body's run and case ids are parsed with
// ulid directly (bodyID), not through store's parsers; an id the store
// would not write in that exact spelling (a display prefix, lower case,
// the zero id, a character outside Crockford base32, a wrong length)
// must be refused, and one it would must be read as the store reads it.
func TestBodyID_SameRuleAsStore(t *testing.T) {
	for _, id := range []string{
		"01JC0000000000000000000CAS", "run_01JC0000000000000000000CAS", "case_01JC0000000000000000000CAS",
		"01jc0000000000000000000cas", "00000000000000000000000000", "01JC0000000000000000000CAI",
		"01JC0000000000000000000CA", "01JC0000000000000000000CASS", "81JC0000000000000000000CAS", "",
	} {
		r, rerr := store.ParseRunID(id)
		storeRun := rerr == nil && r.String() == id && !r.IsZero()
		c, cerr := store.ParseCaseID(id)
		storeCase := cerr == nil && c.String() == id && !c.IsZero()
		got, _, err := decodeRecordBody([]byte(`{"epoch":1,"kind":"Note","run":"` + id + `","seq":1,"v":1}`))
		if (err == nil) != storeRun || (storeRun && got.Run != r) {
			t.Errorf("run %q: decoded %v, %v; the store's rule says %v", id, got.Run, err, storeRun)
		}
		got, _, err = decodeRecordBody([]byte(`{"case":"` + id + `","epoch":1,"kind":"Note","run":"01JC000000000000000000000A","seq":1,"v":1}`))
		if (err == nil) != storeCase || (storeCase && got.Case != c) {
			t.Errorf("case %q: decoded %v, %v; the store's rule says %v", id, got.Case, err, storeCase)
		}
	}
}
