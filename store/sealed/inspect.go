package sealed

import (
	"bytes"
	"strings"
	"time"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// RecordedErasure is a ScopeErased record as read with no key.
type RecordedErasure struct {
	Run    store.RunID    `json:"run"`
	Scope  string         `json:"scope"`
	Actor  store.Operator `json:"actor"`
	At     string         `json:"at"` // RFC 3339, as recorded
	Reason string         `json:"reason"`
	// Fields counts the sealed fields, among the records inspected, under
	// the erased scope.
	Fields int `json:"erased_fields"`
}

// ErasedRecord names the sealed fields of one record whose scope a
// recorded erasure names.
type ErasedRecord struct {
	Run    store.RunID `json:"run"`
	Seq    store.Seq   `json:"seq"`
	Fields []string    `json:"fields"`
}

// Inspection is what records say about sealing when read with no key: how
// many fields are sealed, which erasures were recorded, and which sealed
// fields they erased. An auditor reports it beside verification.
type Inspection struct {
	SealedFields int               `json:"sealed_fields"`
	ErasedFields int               `json:"erased_fields"`
	Erasures     []RecordedErasure `json:"erasures"`
	// Erased lists the records with erased fields, at most MaxListed.
	Erased        []ErasedRecord `json:"erased,omitempty"`
	ErasedOmitted int            `json:"erased_omitted,omitempty"`
}

// MaxListed bounds Inspection.Erased, so inspecting a package of any size
// keeps a bounded report.
const MaxListed = 1000

// Inspector builds an Inspection one record at a time, in memory that
// grows with the scopes seen, not the records. Erasure records may come
// after the records they erase (their run is newer), so records' sealed
// fields are tallied per scope and resolved in Inspection.
type Inspector struct {
	perScope map[string]*scopeTally // keyed by "case/<ULID>" or "run/<ULID>"
	erasures []RecordedErasure
	sealed   int
}

type scopeTally struct {
	fields  int
	records []ErasedRecord // the first MaxListed
	omitted int
}

// scopeKey drops a scope's tenant: a package or a journal view is one
// tenant's, and records do not carry it.
func scopeKey(scope string) string {
	if i := strings.IndexByte(scope, '/'); i >= 0 {
		return scope[i+1:]
	}
	return scope
}

// Add inspects one record from its stored bytes. Bytes that do not decode
// are skipped: the chain's own checks report them.
func (in *Inspector) Add(raw []byte) {
	// Most records of most journals hold no envelope and are no erasure:
	// skip them without parsing.
	if !bytes.Contains(raw, []byte(`"`+EnvelopePrefix)) && !bytes.Contains(raw, []byte(`"kind":"`+KindScopeErased+`"`)) {
		return
	}
	if in.perScope == nil {
		in.perScope = map[string]*scopeTally{}
	}
	b, err := store.DecodeBody(raw)
	if err != nil {
		return
	}
	v, err := canon.Parse(b.Fields)
	if err != nil {
		return
	}
	var names []string
	for _, m := range v.Members {
		if Seals(b.Kind, m.Key) && m.Value.Kind == canon.String && IsEnvelope(m.Value.Str) {
			names = append(names, m.Key)
		}
	}
	if len(names) > 0 {
		in.sealed += len(names)
		k := scopeKey(Scope("", b.Case, b.Run))
		t := in.perScope[k]
		if t == nil {
			t = &scopeTally{}
			in.perScope[k] = t
		}
		t.fields += len(names)
		if len(t.records) < MaxListed {
			t.records = append(t.records, ErasedRecord{Run: b.Run, Seq: b.Seq, Fields: names})
		} else {
			t.omitted++
		}
	}
	if b.Kind == KindScopeErased {
		get := func(k string) string {
			if x, ok := v.Get(k); ok && x.Kind == canon.String {
				return x.Str
			}
			return ""
		}
		e := RecordedErasure{Run: b.Run, Scope: get("scope"), Actor: store.Operator{Actor: get("actor"), Basis: store.Basis(get("basis"))},
			At: get("at"), Reason: get("reason")}
		if _, err := time.Parse(time.RFC3339Nano, e.At); err != nil {
			e.At = "" // not a time: shown as absent rather than trusted
		}
		in.erasures = append(in.erasures, e)
	}
}

// Inspection resolves what was added.
func (in *Inspector) Inspection() Inspection {
	out := Inspection{SealedFields: in.sealed, Erasures: []RecordedErasure{}}
	seen := map[string]bool{}
	for _, e := range in.erasures {
		k := scopeKey(e.Scope)
		if t := in.perScope[k]; t != nil {
			e.Fields = t.fields
			if !seen[k] {
				seen[k] = true
				out.ErasedFields += t.fields
				for _, r := range t.records {
					if len(out.Erased) < MaxListed {
						out.Erased = append(out.Erased, r)
					} else {
						out.ErasedOmitted++
					}
				}
				out.ErasedOmitted += t.omitted
			}
		}
		out.Erasures = append(out.Erasures, e)
	}
	return out
}

// Inspect inspects stored records (their Raw bytes) at once.
func Inspect(recs []store.Record) (Inspection, error) {
	var in Inspector
	for _, r := range recs {
		if _, err := store.DecodeBody(r.Raw); err != nil {
			return Inspection{}, &store.CorruptError{Run: r.Run, Seq: r.Seq, Detail: err.Error()}
		}
		in.Add(r.Raw)
	}
	return in.Inspection(), nil
}
