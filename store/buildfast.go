package store

import (
	"bytes"
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
// facts from (their fields need a value), an invalid kind or phase. A
// body over MaxRecordBytes is refused with the value path's error.
//
// TestParseFreshCanonical_IsTheValuePath and FuzzParseFreshCanonical hold
// the two paths to the same bytes, body and facts, and the bytes to
// DecodeBody.
func parseFreshCanonical(r *parsedRecord, run RunID, epoch Epoch, a Append) (bool, error) {
	switch a.Kind {
	case KindRunAdmitted, KindRunSuspended, KindRunConcluded, KindRunCancelled:
		return false, nil
	}
	fields := a.Fields
	if len(fields) == 0 {
		fields = []byte("{}")
	}
	body := Body{Seq: 1, Run: run, Case: a.Case, Step: a.Step, Phase: a.Phase, EffectKey: a.EffectKey,
		Epoch: epoch, V: RecordVersion, Kind: a.Kind}
	raw, seqAt, ok := spliceBody(body, fields)
	if !ok {
		return false, nil
	}
	// The record owns what it says, as the value path's read-back does: a
	// caller reusing its step or key after Append cannot change it.
	if a.Step != nil {
		step := *a.Step
		body.Step = &step
	}
	if a.EffectKey != nil {
		key := *a.EffectKey
		body.EffectKey = &key
	}
	if n := len(raw); n > MaxRecordBytes {
		return false, &RecordTooLargeError{Bytes: n, Limit: MaxRecordBytes}
	}
	body.Fields = append([]byte(nil), fields...)
	r.body = body
	r.before, r.after = raw[:seqAt:seqAt], raw[seqAt+1:]
	return true, nil
}

// spliceBody encodes b (b.Fields is not read) with fields, the kind's
// fields as canonical bytes, by splicing the routing members into them,
// and returns the bytes and the offset of the seq's value in them. It
// reports false where it cannot vouch for the result, which the value path
// (bodyValueOf) then decides: fields that are not a canonical object or
// use a routing field's name, an invalid kind or phase.
func spliceBody(b Body, fields []byte) (raw []byte, seqAt int, ok bool) {
	if validKind(b.Kind) != nil || (b.Phase != Forward && b.Phase != Compensating) {
		return nil, 0, false
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
	if !b.Case.IsZero() {
		str("case", b.Case.String())
	}
	if b.EffectKey != nil {
		str("effect_key", b.EffectKey.String())
	}
	num("epoch", uint64(b.Epoch))
	str("kind", b.Kind)
	if b.Phase == Compensating {
		str("phase", string(Compensating))
	}
	str("run", b.Run.String())
	seq := len(add)
	num("seq", uint64(b.Seq))
	if b.Step != nil {
		num("step", uint64(*b.Step))
	}
	num("v", uint64(b.V))
	at := make([]int, len(add))
	raw, err := canon.InsertMembers(make([]byte, 0, len(fields)+len(vals)+8*len(add)), fields, add, at,
		func(key []byte) bool { return reserved[string(key)] })
	if err != nil {
		return nil, 0, false
	}
	return raw, at[seq], true
}

// decodeBodyCanonical is decodeBody for bytes that hold to the common
// shape, read in one checked pass (canon.CheckObject) with no parse into a
// value: every routing member's value a plain string (no escape) or a
// plain run of digits, and a kind the store reads no facts from. It
// reports false for any other bytes, which decodeBody then decides and
// whose errors it words; where it reports true, the body is exactly
// decodeBody's. The kind's fields are the members left, written as they
// stand: dropping members from a canonical object leaves one.
//
// TestDecodeBodyCanonical_IsDecodeBody and FuzzDecodeBodyCanonical hold it
// to decodeBody.
func decodeBodyCanonical(raw []byte) (Body, bool) {
	if len(raw) > MaxRecordBytes {
		return Body{}, false
	}
	var b Body
	var seen [9]bool // routing members met, in the order of the switch below
	ok := true
	fields := make([]byte, 1, max(len(raw), 2))
	fields[0] = '{'
	plainString := func(v []byte) (string, bool) {
		if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
			return "", false
		}
		return string(v[1 : len(v)-1]), true
	}
	digits := func(v []byte, bits int) (uint64, bool) {
		if len(v) == 0 || len(v) > 20 {
			return 0, false
		}
		for _, c := range v {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		n, err := strconv.ParseUint(string(v), 10, bits)
		return n, err == nil
	}
	err := canon.CheckObject(raw, func(key, value []byte) {
		if !ok {
			return
		}
		var good bool
		switch string(key) {
		case "seq":
			var n uint64
			n, good = digits(value, 64)
			b.Seq, seen[0] = Seq(n), true
		case "epoch":
			var n uint64
			n, good = digits(value, 64)
			b.Epoch, seen[1] = Epoch(n), true
		case "v":
			var n uint64
			n, good = digits(value, 16)
			b.V, seen[2] = uint16(n), true
		case "step":
			var n uint64
			if n, good = digits(value, 32); good {
				s := uint32(n)
				b.Step = &s
			}
		case "run":
			var s string
			if s, good = plainString(value); good {
				var err error
				b.Run, err = ParseRunID(s)
				good = err == nil && s == b.Run.String() && !b.Run.IsZero()
			}
			seen[3] = true
		case "case":
			var s string
			if s, good = plainString(value); good {
				var err error
				b.Case, err = ParseCaseID(s)
				good = err == nil && s == b.Case.String() && !b.Case.IsZero()
			}
		case "phase":
			var s string
			s, good = plainString(value)
			good = good && Phase(s) == Compensating
			b.Phase = Compensating
		case "effect_key":
			var s string
			if s, good = plainString(value); good {
				d, err := ParseDigest(s)
				good = err == nil
				b.EffectKey = &d
			}
		case "kind":
			b.Kind, good = plainString(value)
			good = good && validKind(b.Kind) == nil
			seen[4] = true
		default:
			if len(fields) > 1 {
				fields = append(fields, ',')
			}
			// key and value alias raw: the member is written as it stands.
			fields = append(append(append(append(fields, '"'), key...), '"', ':'), value...)
			good = true
		}
		ok = ok && good
	})
	if err != nil || !ok || !seen[0] || !seen[1] || !seen[2] || !seen[3] || !seen[4] || b.Seq == 0 {
		return Body{}, false
	}
	switch b.Kind {
	case KindRunAdmitted, KindRunSuspended, KindRunConcluded, KindRunCancelled:
		return Body{}, false // readFacts needs their fields as a value
	}
	b.Fields = append(fields, '}')
	return b, true
}
