package disclosure

import (
	"reflect"
	"testing"
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
