package sealed

import (
	"fmt"
	"time"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
)

// SealedField names one sealed field of a stored record.
type SealedField struct {
	Run   store.RunID `json:"run"`
	Seq   store.Seq   `json:"seq"`
	Field string      `json:"field"`
	Scope string      `json:"scope"`
}

// RecordedErasure is a ScopeErased record as read with no key.
type RecordedErasure struct {
	Run    store.RunID    `json:"run"`
	Scope  string         `json:"scope"`
	Actor  store.Operator `json:"actor"`
	At     time.Time      `json:"at"`
	Reason string         `json:"reason"`
}

// Inspection is what stored records say about sealing, read with no key:
// which fields are sealed, which erasures were recorded, and so which
// sealed fields are erased. An auditor reports it beside verification.
type Inspection struct {
	Sealed   []SealedField     `json:"sealed"`
	Erasures []RecordedErasure `json:"erasures"`
}

// Inspect reads sealing facts from stored records (their Raw bytes). The
// tenant names the scopes, as the records do not carry it.
func Inspect(tenant string, recs []store.Record) (Inspection, error) {
	var in Inspection
	for _, r := range recs {
		b, err := store.DecodeBody(r.Raw)
		if err != nil {
			return Inspection{}, &store.CorruptError{Run: r.Run, Seq: r.Seq, Detail: err.Error()}
		}
		v, err := canon.Parse(b.Fields)
		if err != nil {
			return Inspection{}, &store.CorruptError{Run: r.Run, Seq: r.Seq, Detail: err.Error()}
		}
		scope := Scope(tenant, b.Case, b.Run)
		for _, m := range v.Members {
			if Seals(b.Kind, m.Key) && m.Value.Kind == canon.String && IsEnvelope(m.Value.Str) {
				in.Sealed = append(in.Sealed, SealedField{Run: b.Run, Seq: b.Seq, Field: m.Key, Scope: scope})
			}
		}
		if b.Kind != KindScopeErased {
			continue
		}
		e := RecordedErasure{Run: b.Run}
		get := func(k string) string {
			if x, ok := v.Get(k); ok && x.Kind == canon.String {
				return x.Str
			}
			return ""
		}
		e.Scope, e.Actor.Actor, e.Actor.Basis, e.Reason = get("scope"), get("actor"), store.Basis(get("basis")), get("reason")
		if e.At, err = time.Parse(time.RFC3339Nano, get("at")); err != nil {
			return Inspection{}, &store.CorruptError{Run: b.Run, Seq: b.Seq, Detail: fmt.Sprintf("ScopeErased at %q is not an RFC 3339 time", get("at"))}
		}
		in.Erasures = append(in.Erasures, e)
	}
	return in, nil
}

// Erased lists the sealed fields whose scope a recorded erasure names.
func (in Inspection) Erased() []SealedField {
	gone := map[string]bool{}
	for _, e := range in.Erasures {
		gone[e.Scope] = true
	}
	var out []SealedField
	for _, f := range in.Sealed {
		if gone[f.Scope] {
			out = append(out, f)
		}
	}
	return out
}
