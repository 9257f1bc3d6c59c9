package store

import (
	"strconv"

	"github.com/runseal/runseal/internal/canon"
)

// parseFreshCanonical is ParseBatch's path for a fresh append whose fields
// are canonical already, as an SDK's encoder writes them: the body's bytes
// are the fields' bytes with the routing members spliced in
// (canon.InsertMembers), with no parse into a value, no sort and no
// re-encoding. It fills r as the value path would (the body, and the bytes
// before and after the seq's value) and reports true. It reports false,
// having set nothing, for every append it does not vouch for, which the
// value path then decides and whose errors it words: fields that are not a
// canonical object or use a routing field's name, a kind the store reads
// facts from (their fields need a value), an invalid kind or phase.
//
// TestParseFreshCanonical_IsTheValuePath and FuzzParseFreshCanonical hold
// the two paths to the same bytes, body and facts, and the bytes to
// DecodeBody.
func parseFreshCanonical(r *parsedRecord, run RunID, epoch Epoch, a Append) (bool, error) {
	switch a.Kind {
	case KindRunAdmitted, KindRunSuspended, KindRunConcluded, KindRunCancelled:
		return false, nil
	}
	if validKind(a.Kind) != nil || (a.Phase != Forward && a.Phase != Compensating) {
		return false, nil
	}
	fields := a.Fields
	if len(fields) == 0 {
		fields = []byte("{}")
	}
	// The routing members in canonical key order. Every value is plain
	// ASCII (ULIDs, lowercase hex, decimal digits, a kind's characters):
	// written as it is, between quotes for a string.
	vals := make([]byte, 0, 256)
	var buf [9]canon.RawMember
	add := buf[:0]
	str := func(key, s string) {
		i := len(vals)
		vals = append(append(append(vals, '"'), s...), '"')
		add = append(add, canon.RawMember{Key: key, Value: vals[i:len(vals):len(vals)]})
	}
	num := func(key string, n uint64) {
		i := len(vals)
		vals = strconv.AppendUint(vals, n, 10)
		add = append(add, canon.RawMember{Key: key, Value: vals[i:len(vals):len(vals)]})
	}
	if !a.Case.IsZero() {
		str("case", a.Case.String())
	}
	if a.EffectKey != nil {
		str("effect_key", a.EffectKey.String())
	}
	num("epoch", uint64(epoch))
	str("kind", a.Kind)
	if a.Phase == Compensating {
		str("phase", string(Compensating))
	}
	str("run", run.String())
	seqAt := len(add)
	num("seq", 1)
	if a.Step != nil {
		num("step", uint64(*a.Step))
	}
	num("v", RecordVersion)
	at := make([]int, len(add))
	raw, err := canon.InsertMembers(make([]byte, 0, len(fields)+len(vals)+8*len(add)), fields, add, at,
		func(key []byte) bool { return reserved[string(key)] })
	if err != nil {
		return false, nil
	}
	if n := len(raw); n > MaxRecordBytes {
		return false, &RecordTooLargeError{Bytes: n, Limit: MaxRecordBytes}
	}
	r.body = Body{Seq: 1, Run: run, Case: a.Case, Step: a.Step, Phase: a.Phase, EffectKey: a.EffectKey,
		Epoch: epoch, V: RecordVersion, Kind: a.Kind, Fields: append([]byte(nil), fields...)}
	r.before, r.after = raw[:at[seqAt]:at[seqAt]], raw[at[seqAt]+1:]
	return true, nil
}
