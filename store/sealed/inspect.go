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
	// the erased scope (a lower bound when Inspection.UnattributedFields is
	// not zero).
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
	// ErasuresOmitted counts the recorded erasures beyond the first
	// MaxListed; their scopes still count in ErasedFields.
	ErasuresOmitted int `json:"erasures_omitted,omitempty"`
	// Erased lists the records with erased fields, at most MaxListed.
	Erased        []ErasedRecord `json:"erased,omitempty"`
	ErasedOmitted int            `json:"erased_omitted,omitempty"`
	// UnattributedFields counts the sealed fields under scopes beyond the
	// first MaxScopes met: they count in SealedFields, but not towards any
	// erasure, so ErasedFields and each erasure's Fields are lower bounds
	// when it is not zero.
	UnattributedFields int `json:"unattributed_fields,omitempty"`
}

// MaxListed bounds Inspection.Erased and Inspection.Erasures, so inspecting
// a package of any size keeps a bounded report.
const MaxListed = 1000

// MaxScopes bounds the scopes an Inspector tallies, and with them its
// memory: a package whose every run is sealed under a scope of its own
// must not grow the auditor with its size.
const MaxScopes = 4096

// listedPerScope bounds the records a scope keeps for Inspection.Erased.
// Which scopes an erasure names is known only when its record is read,
// possibly last, so every tallied scope keeps a few.
const listedPerScope = 8

// Inspector builds an Inspection one record at a time, in memory bounded
// by MaxScopes and MaxListed whatever the number of records or scopes.
// Erasure records may come after the records they erase (their run is
// newer), so records' sealed fields are tallied per scope and resolved in
// Inspection.
type Inspector struct {
	perScope     map[scopeID]*scopeTally
	order        []scopeID // tallied scopes, first met first
	erasures     []RecordedErasure
	omitted      int // erasures beyond MaxListed
	sealed       int
	unattributed int
}

// scopeID is a scope without its tenant (a package or a journal view is
// one tenant's, and records do not carry it): a case or, for a record
// without a case, its run.
type scopeID struct {
	isCase bool
	id     [16]byte
}

type scopeTally struct {
	fields  int
	records int
	listed  []ErasedRecord // the first listedPerScope
	erased  bool           // a recorded erasure names it
}

// parseScope reads a scope string ("<tenant>/case/<ULID>" or
// "<tenant>/run/<ULID>"); ok is false for anything else.
func parseScope(scope string) (scopeID, bool) {
	i := strings.IndexByte(scope, '/')
	if i < 0 {
		return scopeID{}, false
	}
	switch s := scope[i+1:]; {
	case strings.HasPrefix(s, "case/"):
		c, err := store.ParseCaseID(s[len("case/"):])
		if err != nil || c.String() != s[len("case/"):] {
			return scopeID{}, false
		}
		return scopeID{isCase: true, id: [16]byte(c)}, true
	case strings.HasPrefix(s, "run/"):
		r, err := store.ParseRunID(s[len("run/"):])
		if err != nil || r.String() != s[len("run/"):] {
			return scopeID{}, false
		}
		return scopeID{id: [16]byte(r)}, true
	}
	return scopeID{}, false
}

// tally returns the tally of a scope, creating it while fewer than
// MaxScopes are kept; nil when the bound is reached.
func (in *Inspector) tally(k scopeID) *scopeTally {
	if t := in.perScope[k]; t != nil {
		return t
	}
	if len(in.perScope) >= MaxScopes {
		return nil
	}
	if in.perScope == nil {
		in.perScope = map[scopeID]*scopeTally{}
	}
	t := &scopeTally{}
	in.perScope[k] = t
	in.order = append(in.order, k)
	return t
}

var (
	envelopeValue = []byte(`"` + EnvelopePrefix)
	erasureKind   = []byte(`"` + KindScopeErased + `"`)
)

// Relevant reports whether a record's top-level member, given by its key as
// written between its quotes and the exact bytes of its canonical value,
// makes the record one that Add looks at: a string in a sealed envelope,
// or the kind of an erasure record. A reader that already walks each
// record's members (disclosure.Options.RecordFilter) so hands Add only
// those records, instead of Add scanning every record's bytes. It is safe
// for concurrent use.
func Relevant(key, value []byte) bool {
	return bytes.HasPrefix(value, envelopeValue) || string(key) == "kind" && bytes.Equal(value, erasureKind)
}

// Add inspects one record from its stored bytes. Bytes that do not decode
// are skipped: the chain's own checks report them.
func (in *Inspector) Add(raw []byte) {
	// Most records of most journals hold no envelope and are no erasure:
	// skip them without parsing.
	if !bytes.Contains(raw, envelopeValue) && !bytes.Contains(raw, []byte(`"kind":`+string(erasureKind))) {
		return
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
		k := scopeID{id: [16]byte(b.Run)}
		if !b.Case.IsZero() {
			k = scopeID{isCase: true, id: [16]byte(b.Case)}
		}
		if t := in.tally(k); t != nil {
			t.fields += len(names)
			t.records++
			if len(t.listed) < listedPerScope {
				t.listed = append(t.listed, ErasedRecord{Run: b.Run, Seq: b.Seq, Fields: names})
			}
		} else {
			in.unattributed += len(names)
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
		if k, ok := parseScope(e.Scope); ok {
			if t := in.tally(k); t != nil {
				t.erased = true
			}
		}
		if len(in.erasures) < MaxListed {
			in.erasures = append(in.erasures, e)
		} else {
			in.omitted++
		}
	}
}

// Inspection resolves what was added.
func (in *Inspector) Inspection() Inspection {
	out := Inspection{SealedFields: in.sealed, Erasures: []RecordedErasure{}, ErasuresOmitted: in.omitted, UnattributedFields: in.unattributed}
	listed := map[scopeID]bool{}
	list := func(k scopeID, t *scopeTally) {
		if listed[k] {
			return
		}
		listed[k] = true
		out.ErasedFields += t.fields
		for _, r := range t.listed {
			if len(out.Erased) < MaxListed {
				out.Erased = append(out.Erased, r)
			} else {
				out.ErasedOmitted++
			}
		}
		out.ErasedOmitted += t.records - len(t.listed)
	}
	// The records of the erasures listed first, in their order; then those
	// of erasures past MaxListed, in the order their scopes were met.
	for _, e := range in.erasures {
		if k, ok := parseScope(e.Scope); ok {
			if t := in.perScope[k]; t != nil {
				e.Fields = t.fields
				list(k, t)
			}
		}
		out.Erasures = append(out.Erasures, e)
	}
	for _, k := range in.order {
		if t := in.perScope[k]; t.erased {
			list(k, t)
		}
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
