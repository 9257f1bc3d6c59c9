package store

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/runseal/runseal/internal/canon"
)

// sameAsValuePath holds parseFreshCanonical to parseFreshValue for one
// append: where the canonical path vouches for it, the body, the bytes
// around the seq and the facts are the value path's, and the bytes at any
// seq decode (DecodeBody) to that body; where it does not, it set nothing.
// It reports whether the canonical path took the append.
func sameAsValuePath(t *testing.T, run RunID, epoch Epoch, a Append) bool {
	t.Helper()
	var rc, rv parsedRecord
	ok, errC := parseFreshCanonical(&rc, run, epoch, a)
	fv, errV := parseFreshValue(&rv, run, epoch, a)
	if errC != nil {
		var big, bigV *RecordTooLargeError
		if !errors.As(errC, &big) || !errors.As(errV, &bigV) || *big != *bigV {
			t.Fatalf("%s %q: canonical path failed with %v, value path with %v", a.Kind, a.Fields, errC, errV)
		}
		return false
	}
	if !ok {
		if !reflect.DeepEqual(rc, parsedRecord{}) {
			t.Fatalf("%s %q: the canonical path declined but set %+v", a.Kind, a.Fields, rc)
		}
		return false
	}
	if errV != nil {
		t.Fatalf("%s %q: the canonical path took an append the value path refuses: %v", a.Kind, a.Fields, errV)
	}
	if !reflect.DeepEqual(rc.body, rv.body) {
		t.Fatalf("%s %q: body\n canonical %+v\n     value %+v", a.Kind, a.Fields, rc.body, rv.body)
	}
	if !bytes.Equal(rc.before, rv.before) || !bytes.Equal(rc.after, rv.after) {
		t.Fatalf("%s %q: bytes\n canonical %s|%s\n     value %s|%s", a.Kind, a.Fields, rc.before, rc.after, rv.before, rv.after)
	}
	fc, errFC := readFacts(rc.body, canon.Value{})
	fvv, errFV := readFacts(rv.body, fv)
	if !reflect.DeepEqual(fc, fvv) || (errFC == nil) != (errFV == nil) {
		t.Fatalf("%s %q: facts %+v (%v), value path's %+v (%v)", a.Kind, a.Fields, fc, errFC, fvv, errFV)
	}
	for _, seq := range []Seq{1, 9, 1 << 40} {
		raw := append(append(append([]byte(nil), rc.before...), strconv.FormatUint(uint64(seq), 10)...), rc.after...)
		b, err := DecodeBody(raw)
		want := rc.body
		want.Seq = seq
		if err != nil || !reflect.DeepEqual(b, want) {
			t.Fatalf("%s %q at seq %d: %s decodes to %+v (%v), want %+v", a.Kind, a.Fields, seq, raw, b, err, want)
		}
	}
	return true
}

// TestParseFreshCanonical_IsTheValuePath: splicing routing members into
// canonical fields writes the bytes the value path writes, wherever the
// fields' keys sort among the routing ones, and the splice declines (the
// value path then decides and words the error) every append it cannot
// vouch for: fields not canonical or naming a routing field, a kind whose
// facts the store reads, a bad kind or phase.
func TestParseFreshCanonical_IsTheValuePath(t *testing.T) {
	run, cs := NewRunID(), NewCaseID()
	step := uint32(4000000000)
	key := Sum([]byte("effect"))
	for _, tc := range []struct {
		a    Append
		fast bool // the canonical path takes it
	}{
		{Append{Kind: "BenchStep", Fields: []byte(`{"payload":"xxxx"}`)}, true},
		{Append{Kind: "Note"}, true},
		{Append{Kind: "Note", Fields: []byte(`{}`)}, true},
		{Append{Kind: "Note", Case: cs, Step: &step, Phase: Compensating, EffectKey: &key,
			Fields: []byte(`{"":1,"cas":2,"d":{"seq":3},"effect":4,"epoch_":5,"kinda":6,"ph":7,"ru":8,"seqs":9,"st":10,"u":11,"vv":12,"é":13,"😀":14}`)}, true},
		{Append{Kind: KindEffectStarted, EffectKey: &key, Step: &step, Fields: []byte(`{"a\nb":[1,2.5,-3e-7],"z":null}`)}, true},
		{Append{Kind: KindEffectStarted, Fields: []byte(`{}`)}, true}, // readFacts refuses it, as on the value path
		{Append{Kind: "a.b-c_D9", Fields: []byte(`{"x":"\u001f"}`)}, true},
		{Append{Kind: "Note", Fields: []byte(`{"b":1,"a":2}`)}, false}, // not canonical: the value path sorts it
		{Append{Kind: "Note", Fields: []byte(` {"a":1}`)}, false},      // whitespace
		{Append{Kind: "Note", Fields: []byte(`{"a":1.0}`)}, false},     // a number's second spelling
		{Append{Kind: "Note", Fields: []byte(`{"step":1}`)}, false},    // a routing field's name, absent from the body
		{Append{Kind: "Note", Fields: []byte(`{"seq":1}`)}, false},     // one present in it
		{Append{Kind: "Note", Fields: []byte(`[]`)}, false},            // not an object
		{Append{Kind: "Note", Fields: []byte(`{"a":1`)}, false},        // not JSON
		{Append{Kind: "No te", Fields: []byte(`{}`)}, false},           // a bad kind
		{Append{Kind: "Note", Phase: "sideways", Fields: []byte(`{}`)}, false},
		{Append{Kind: KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}, false}, // facts need the value
		{Append{Kind: KindRunAdmitted, Fields: []byte(`{"source":"api"}`)}, false},
		{Append{Kind: KindRunSuspended, Fields: []byte(`{"awaiting":"event","event":"e"}`)}, false},
		{Append{Kind: KindRunCancelled, Fields: []byte(`{"actor":{"actor":"op","basis":"asserted"}}`)}, false},
	} {
		tc.a.Run = run
		if got := sameAsValuePath(t, run, 3, tc.a); got != tc.fast {
			t.Errorf("%s %q: canonical path took it: %v, want %v", tc.a.Kind, tc.a.Fields, got, tc.fast)
		}
	}
}

// TestParseFreshCanonical_TooLargeIsRefusedAlike: a body over
// MaxRecordBytes is refused with the value path's error, not written.
func TestParseFreshCanonical_TooLargeIsRefusedAlike(t *testing.T) {
	run := NewRunID()
	for _, n := range []int{MaxRecordBytes - 200, MaxRecordBytes - 80, MaxRecordBytes} {
		a := Append{Run: run, Kind: "Note", Fields: []byte(`{"p":"` + strings.Repeat("x", n) + `"}`)}
		sameAsValuePath(t, run, 1, a)
		if _, err := ParseBatch(1, []Append{a}); n >= MaxRecordBytes-80 && !errors.Is(err, ErrRecordTooLarge) {
			t.Errorf("%d bytes of payload: %v, want ErrRecordTooLarge", n, err)
		}
	}
}

// TestParseFreshCanonical_FieldsAreNotAliased: the record keeps its own
// copy of the fields, so a caller reusing its buffer after Append cannot
// change what the returned Record says.
func TestParseFreshCanonical_FieldsAreNotAliased(t *testing.T) {
	run := NewRunID()
	fields := []byte(`{"a":"x"}`)
	step := uint32(5)
	key := Sum([]byte("k"))
	p, err := BuildBatch(Head{}, 1, []Append{{Run: run, Kind: "Note", Step: &step, EffectKey: &key, Fields: fields}})
	if err != nil {
		t.Fatal(err)
	}
	wantKey := key
	copy(fields, `{"a":"y"}`)
	step = 6
	key[0] ^= 0xff
	if string(p[0].Fields) != `{"a":"x"}` || !bytes.Contains(p[0].Raw, []byte(`"a":"x"`)) {
		t.Fatalf("record changed with the caller's buffer: fields %s, raw %s", p[0].Fields, p[0].Raw)
	}
	if *p[0].Step != 5 || *p[0].EffectKey != wantKey {
		t.Fatalf("record changed with the caller's step or key: step %d, key %s; raw %s", *p[0].Step, p[0].EffectKey, p[0].Raw)
	}
}

// FuzzParseFreshCanonical holds the canonical path to the value path for
// any fields, kind, step, case, phase, effect key and epoch.
func FuzzParseFreshCanonical(f *testing.F) {
	f.Add([]byte(`{"payload":"x"}`), "BenchStep", uint32(0), uint8(0), uint64(1))
	f.Add([]byte(`{"a":1,"seqq":[],"é":{}}`), "Note", uint32(7), uint8(0xff), uint64(1<<62))
	f.Add([]byte(`{"b":1,"a":2}`), KindEffectStarted, uint32(1), uint8(4), uint64(9))
	f.Add([]byte(`{"outcome":"succeeded"}`), KindRunConcluded, uint32(0), uint8(0), uint64(2))
	run, cs := NewRunID(), NewCaseID()
	key := Sum([]byte("k"))
	f.Fuzz(func(t *testing.T, fields []byte, kind string, step uint32, flags uint8, epoch uint64) {
		if ValidateEpoch(Epoch(epoch)) != nil {
			return // ParseBatch refuses it before either path
		}
		a := Append{Run: run, Kind: kind, Fields: fields}
		if flags&1 != 0 {
			a.Case = cs
		}
		if flags&2 != 0 {
			a.Step = &step
		}
		if flags&4 != 0 {
			a.EffectKey = &key
		}
		switch flags >> 3 & 3 {
		case 1:
			a.Phase = Compensating
		case 2:
			a.Phase = Phase(kind)
		}
		sameAsValuePath(t, run, Epoch(epoch), a)
	})
}

// sameAsDecodeBody holds decodeBodyCanonical to decodeBody for raw, and
// reports whether the canonical path took it.
func sameAsDecodeBody(t *testing.T, raw []byte) bool {
	t.Helper()
	got, ok := decodeBodyCanonical(raw)
	if !ok {
		if !reflect.DeepEqual(got, Body{}) {
			t.Fatalf("%s: the canonical path declined but returned %+v", raw, got)
		}
		return false
	}
	want, _, err := decodeBody(raw)
	if err != nil {
		t.Fatalf("%s: the canonical path took bytes decodeBody refuses: %v", raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n canonical %+v\n decodeBody %+v", raw, got, want)
	}
	return true
}

// TestDecodeBodyCanonical_IsDecodeBody: a restored or sealed body read in
// one pass is the body decodeBody reads, and the one pass declines (for
// decodeBody to refuse and word the error) every body it cannot vouch
// for: not canonical, a routing member missing, of the wrong type or
// spelled with an escape, seq 0, a run or case with a second spelling,
// and the kinds whose facts need their fields as a value.
func TestDecodeBodyCanonical_IsDecodeBody(t *testing.T) {
	const run = `"run":"01JD0000000000000000000001"`
	for _, tc := range []struct {
		raw  string
		fast bool
	}{
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":1,"text":"x","v":1}`, true},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":1,"v":1}`, true},
		{`{"":[],"a\nb":{"seq":"x"},"case":"01JD00000000000000000000C1","effect_key":"abababababababababababababababababababababababababababababababab","epoch":7,"kind":"EffectStarted","phase":"compensating",` + run + `,"seq":2,"seqq":-1.5,"step":3,"v":1,"é":"sealed:AQ"}`, true},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":18446744073709551615,"v":1}`, true},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":18446744073709551616,"v":1}`, false}, // out of range
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":0,"v":1}`, false},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":-1,"v":1}`, false},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":1.5,"v":1}`, false},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":"1","v":1}`, false},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":1,"v":65536}`, false},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":1,"step":4294967296,"v":1}`, false},
		{`{"epoch":1,"kind":"Note",` + run + `,"seq":1}`, false}, // no v
		{`{"epoch":1,` + run + `,"seq":1,"v":1}`, false},         // no kind
		{`{"kind":"Note",` + run + `,"seq":1,"v":1}`, false},     // no epoch
		{`{"case":"case_01JD00000000000000000000C1","epoch":1,"kind":"Note",` + run + `,"seq":1,"v":1}`, false},
		{`{"epoch":1,"kind":"Note","seq":1,"v":1}`, false},                                    // no run
		{`{"epoch":1,"kind":"No\u0074e",` + run + `,"seq":1,"v":1}`, false},                   // not canonical
		{`{"epoch":1,"kind":"N\"ote",` + run + `,"seq":1,"v":1}`, false},                      // an escape
		{`{"epoch":1,"kind":"No te",` + run + `,"seq":1,"v":1}`, false},                       // a bad kind
		{`{"epoch":1,"kind":"Note","run":"01jd0000000000000000000001","seq":1,"v":1}`, false}, // second spelling
		{`{"epoch":1,"kind":"Note","run":"run_01JD0000000000000000000001","seq":1,"v":1}`, false},
		{`{"epoch":1,"kind":"Note","run":"00000000000000000000000000","seq":1,"v":1}`, false},
		{`{"case":"00000000000000000000000000","epoch":1,"kind":"Note",` + run + `,"seq":1,"v":1}`, false},
		{`{"epoch":1,"kind":"Note","phase":"forward",` + run + `,"seq":1,"v":1}`, false},
		{`{"effect_key":"AB","epoch":1,"kind":"Note",` + run + `,"seq":1,"v":1}`, false},
		{`{"epoch":1,"kind":"RunConcluded","outcome":"succeeded",` + run + `,"seq":1,"v":1}`, false},
		{`{"epoch":1,"kind":"RunAdmitted",` + run + `,"seq":1,"v":1}`, false},
		{`{"seq":1, "epoch":1}`, false},
		{`[]`, false},
	} {
		if got := sameAsDecodeBody(t, []byte(tc.raw)); got != tc.fast {
			t.Errorf("%s: canonical path took it: %v, want %v", tc.raw, got, tc.fast)
		}
	}
}

// FuzzDecodeBodyCanonical holds the one-pass read to decodeBody for any
// bytes.
func FuzzDecodeBodyCanonical(f *testing.F) {
	f.Add([]byte(`{"epoch":1,"kind":"Note","run":"01JD0000000000000000000001","seq":1,"text":"x","v":1}`))
	f.Add([]byte(`{"case":"01JD00000000000000000000C1","effect_key":"abababababababababababababababababababababababababababababababab","epoch":7,"kind":"EffectStarted","phase":"compensating","run":"01JD0000000000000000000001","seq":2,"step":3,"v":1}`))
	f.Add([]byte(`{"epoch":1,"kind":"RunConcluded","outcome":"succeeded","run":"01JD0000000000000000000001","seq":1,"v":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) { sameAsDecodeBody(t, raw) })
}

// checkEncodeBodyValue holds EncodeBodyValue, which splices fields that
// marshal canonical, to the value path for fields (JSON) and b.
func checkEncodeBodyValue(t *testing.T, b Body, fields []byte) {
	t.Helper()
	v, err := canon.Parse(fields)
	if err != nil {
		return
	}
	got, errG := EncodeBodyValue(b, v)
	var want []byte
	obj, errW := bodyValueOf(b, v)
	if errW == nil {
		if want = obj.MarshalSized(); len(want) > MaxRecordBytes {
			want, errW = nil, &RecordTooLargeError{Bytes: len(want), Limit: MaxRecordBytes}
		}
	}
	if (errG == nil) != (errW == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%.200s with %.200s:\n splice %.200s (%v)\n  value %.200s (%v)", fmt.Sprintf("%+v", b), fields, got, errG, want, errW)
	}
}

// TestEncodeBodyValue_SpliceIsTheValuePath: the sealing decorator's
// encoding (EncodeBodyValue) writes the value path's bytes, and refuses
// what it refuses.
func TestEncodeBodyValue_SpliceIsTheValuePath(t *testing.T) {
	run, cs := NewRunID(), NewCaseID()
	step := uint32(3)
	key := Sum([]byte("e"))
	big := strings.Repeat("x", MaxRecordBytes-60)
	bigBody := Body{Seq: 1, Run: run, Epoch: 1, V: RecordVersion, Kind: "Big"}
	if got, err := EncodeBodyValue(bigBody, canon.Value{Kind: canon.Object, Members: []canon.Member{{Key: "p", Value: canon.StringValue(big)}}}); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("a body over MaxRecordBytes: %d bytes, %v; want ErrRecordTooLarge", len(got), err)
	}
	checkEncodeBodyValue(t, bigBody, []byte(`{"p":"`+big+`"}`))
	for _, f := range []string{`{}`, `{"b":1,"a":2}`, `{"p":"sealed:AQ","seqq":[1],"é":{"z":1,"a":2}}`, `{"seq":1}`, `{"step":1}`, `[]`, `"x"`} {
		for _, b := range []Body{
			{Seq: 7, Run: run, Epoch: 2, V: RecordVersion, Kind: "Note"},
			{Seq: 1 << 40, Run: run, Case: cs, Step: &step, Phase: Compensating, EffectKey: &key, Epoch: 1 << 62, V: RecordVersion, Kind: KindEffectStarted},
			{Seq: 1, Run: run, Epoch: 1, V: RecordVersion, Kind: "bad kind"},
			{Seq: 1, Run: run, Epoch: 1, V: RecordVersion, Kind: "Note", Phase: "sideways"},
		} {
			checkEncodeBodyValue(t, b, []byte(f))
		}
	}
}

// FuzzEncodeBodyValue holds the splice to the value path for any fields
// and routing members.
func FuzzEncodeBodyValue(f *testing.F) {
	f.Add([]byte(`{"payload":"x"}`), "Note", uint32(0), uint8(0), uint64(1), uint64(1))
	f.Add([]byte(`{"b":1,"a":{"y":2,"x":1}}`), "EffectStarted", uint32(9), uint8(0xff), uint64(1<<40), uint64(3))
	run, cs := NewRunID(), NewCaseID()
	key := Sum([]byte("k"))
	f.Fuzz(func(t *testing.T, fields []byte, kind string, step uint32, flags uint8, seq, epoch uint64) {
		b := Body{Seq: Seq(seq), Run: run, Epoch: Epoch(epoch), V: RecordVersion, Kind: kind}
		if flags&1 != 0 {
			b.Case = cs
		}
		if flags&2 != 0 {
			b.Step = &step
		}
		if flags&4 != 0 {
			b.EffectKey = &key
		}
		if flags&8 != 0 {
			b.Phase = Compensating
		}
		checkEncodeBodyValue(t, b, fields)
	})
}
