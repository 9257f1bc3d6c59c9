package sealed

import "github.com/runseal/runseal/store"

// KindScopeErased is the record an erasure writes, in a run of its own, so
// that the act of erasing is itself in the chain and the log. Its fields
// (scope, actor, basis, at, reason) stay clear: an auditor must be able to
// read who erased what, when and why, with no key.
const KindScopeErased = "ScopeErased"

// clear lists, per kind, the fields the rule leaves in the clear: the
// fields a store index reads (store.ReadFacts) and the erasure record's.
// Every other field of every kind is sealed. Routing fields (seq, run, case,
// step, phase, effect_key, epoch, v, kind) are never among a record's own
// fields and are never sealed.
var clearFields = map[string]map[string]bool{
	store.KindRunAdmitted:  {"admission_key": true, "source": true},
	store.KindRunSuspended: {"awaiting": true, "event": true, "until": true},
	store.KindRunConcluded: {"outcome": true},
	store.KindRunCancelled: {"actor": true, "reason": true},
	KindScopeErased:        {"scope": true, "actor": true, "basis": true, "at": true, "reason": true},
}

// Seals reports whether the rule seals field of a record of kind. The rule
// is the store's, not the caller's: see spec/sealing.md.
func Seals(kind, field string) bool { return !clearFields[kind][field] }
