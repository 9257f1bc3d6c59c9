package sealed

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/runseal/runseal/store"
)

// idN is a ULID-shaped id numbered n.
func idN(n int) [16]byte {
	var u [16]byte
	u[0] = 0x01
	binary.BigEndian.PutUint64(u[8:], uint64(n)+1)
	return u
}

// sealedRecord is a record of run r (in case c unless zero) with one
// sealed field.
func sealedRecord(r store.RunID, c store.CaseID, seq int) []byte {
	cs := ""
	if !c.IsZero() {
		cs = `"case":"` + c.String() + `",`
	}
	return fmt.Appendf(nil, `{%s"epoch":1,"kind":"Note","note":"sealed:AQID","run":"%s","seq":%d,"v":1}`, cs, r, seq)
}

func erasureRecord(r store.RunID, scope string) []byte {
	return fmt.Appendf(nil, `{"actor":"dpo@example.com","at":"2026-12-01T00:00:00Z","basis":"authenticated","epoch":1,"kind":"ScopeErased","reason":"request","run":"%s","scope":"%s","seq":1,"v":1}`, r, scope)
}

// The inspector used to keep a tally, with up to MaxListed records, per
// sealed scope: a package whose every run is sealed under a scope of its
// own grew the auditor with its size. Three times MaxScopes such runs, an
// erasure of the first scope and one of a scope past the bound, and many
// more erasures than MaxListed: the summary keeps MaxScopes scopes,
// attributes what it can exactly, says how much it could not, and lists
// at most MaxListed erasures.
func TestInspector_ManySealedScopesBoundedSummary(t *testing.T) {
	var in Inspector
	const runs = 3 * MaxScopes
	for i := range runs {
		in.Add(sealedRecord(store.RunID(idN(i)), store.CaseID{}, 1))
		in.Add(sealedRecord(store.RunID(idN(i)), store.CaseID{}, 2))
	}
	if len(in.perScope) != MaxScopes || len(in.order) != MaxScopes {
		t.Fatalf("%d scopes tallied (%d in order) after %d sealed scopes; want the bound %d", len(in.perScope), len(in.order), runs, MaxScopes)
	}
	eraser := store.RunID(idN(runs + 1))
	in.Add(erasureRecord(eraser, RunScope("t", store.RunID(idN(0)))))
	in.Add(erasureRecord(eraser, RunScope("t", store.RunID(idN(runs-1)))))
	for i := range MaxListed + 10 {
		in.Add(erasureRecord(eraser, RunScope("t", store.RunID(idN(1+i)))))
	}
	if len(in.perScope) != MaxScopes || len(in.erasures) != MaxListed {
		t.Fatalf("%d scopes and %d erasures kept; want %d and %d", len(in.perScope), len(in.erasures), MaxScopes, MaxListed)
	}
	got := in.Inspection()
	if got.SealedFields != 2*runs || got.UnattributedFields != 2*(runs-MaxScopes) {
		t.Errorf("sealed %d, unattributed %d; want %d and %d", got.SealedFields, got.UnattributedFields, 2*runs, 2*(runs-MaxScopes))
	}
	if len(got.Erasures) != MaxListed || got.ErasuresOmitted != 12 {
		t.Errorf("%d erasures listed, %d omitted; want %d and 12", len(got.Erasures), got.ErasuresOmitted, MaxListed)
	}
	if got.Erasures[0].Fields != 2 || got.Erasures[1].Fields != 0 {
		t.Errorf("erased fields per erasure %d and %d; want 2 (a tallied scope) and 0 (past the bound)", got.Erasures[0].Fields, got.Erasures[1].Fields)
	}
	// Scopes 0 .. MaxListed+10 are erased, all tallied: 2 fields each, the
	// omitted erasures' scopes included.
	if want := 2 * (MaxListed + 11); got.ErasedFields != want {
		t.Errorf("erased fields %d, want %d", got.ErasedFields, want)
	}
	if len(got.Erased) != MaxListed || got.ErasedOmitted != 2*(MaxListed+11)-MaxListed {
		t.Errorf("%d erased records listed, %d omitted", len(got.Erased), got.ErasedOmitted)
	}
}

// A recorded erasure may come before the records it erases (a case's runs
// newer than the act): they count all the same, and a scope's records
// beyond the few it lists are counted as omitted.
func TestInspector_ErasureBeforeItsRecords(t *testing.T) {
	var in Inspector
	c := store.CaseID(idN(7))
	in.Add(erasureRecord(store.RunID(idN(1)), CaseScope("", c)))
	for seq := 1; seq <= 20; seq++ {
		in.Add(sealedRecord(store.RunID(idN(2)), c, seq))
	}
	in.Add(sealedRecord(store.RunID(idN(3)), store.CaseID{}, 1)) // another scope, not erased
	got := in.Inspection()
	if got.SealedFields != 21 || got.ErasedFields != 20 || got.Erasures[0].Fields != 20 {
		t.Errorf("inspection %+v; want 20 of 21 sealed fields erased", got)
	}
	if len(got.Erased) != listedPerScope || got.ErasedOmitted != 20-listedPerScope || got.Erased[0].Seq != 1 {
		t.Errorf("%d records listed, %d omitted, first %+v", len(got.Erased), got.ErasedOmitted, got.Erased[0])
	}
}

func TestRelevant(t *testing.T) {
	for _, c := range []struct {
		key, value string
		want       bool
	}{
		{"note", `"sealed:AQID"`, true},
		{"kind", `"ScopeErased"`, true},
		{"kind", `"Note"`, false},
		{"kind", `"ScopeErasedLater"`, false},
		{"scope", `"ScopeErased"`, false},
		{"note", `"not sealed:AQID"`, false},
		{"note", `{"x":"sealed:AQID"}`, false}, // nested members are not sealed fields
		{"note", `12`, false},
	} {
		if got := Relevant([]byte(c.key), []byte(c.value)); got != c.want {
			t.Errorf("Relevant(%s, %s) = %v", c.key, c.value, got)
		}
	}
}
