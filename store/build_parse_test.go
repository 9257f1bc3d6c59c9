package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestBuildBatch_ParsedOnceAgreesWithDecode: BuildBatch reads back what
// it encoded from the encoder's value instead of parsing the bytes again
// (issue 10 item 8). What it hands the backend must be exactly what a later
// DecodeBody and ReadFacts of the stored bytes yield.
func TestBuildBatch_ParsedOnceAgreesWithDecode(t *testing.T) {
	run, cs := NewRunID(), NewCaseID()
	step := uint32(7)
	key := Sum([]byte("effect"))
	batch := []Append{
		{Run: run, Kind: KindRunAdmitted, Case: cs, Fields: []byte(` { "source" : "api", "admission_key":"k\u00e9", "n": 1.50 } `)},
		{Run: run, Kind: KindEffectStarted, Step: &step, EffectKey: &key, Phase: Compensating},
		{Run: run, Kind: KindRunSuspended, Fields: []byte(`{"awaiting":"time","until":"2026-01-02T03:04:05.5+01:00"}`)},
		{Run: run, Kind: KindRunCancelled, Fields: []byte(`{"actor":{"actor":"op","basis":"asserted"},"reason":"r"}`)},
		{Run: run, Kind: "Note", Fields: []byte(`{"z":[1,{"b":2,"a":"\u0001"}],"a":null}`)},
		{Run: run, Kind: KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
	}
	ps, err := BuildBatch(Head{}, 3, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		b, err := DecodeBody(p.Raw)
		if err != nil {
			t.Fatalf("record %d does not decode: %v", i, err)
		}
		if !reflect.DeepEqual(b, p.Body) {
			t.Errorf("record %d: built %+v, decodes to %+v", i, p.Body, b)
		}
		f, err := ReadFacts(b)
		if err != nil || !reflect.DeepEqual(f, p.Facts) {
			t.Errorf("record %d: facts built %+v, read %+v (%v)", i, p.Facts, f, err)
		}
	}
	// Restoring the same bytes builds the same records.
	restore := make([]Append, len(ps))
	for i, p := range ps {
		restore[i] = Append{Run: run, Raw: p.Raw}
	}
	again, err := BuildBatch(Head{}, 3, restore)
	if err != nil || !reflect.DeepEqual(again, ps) {
		t.Fatalf("restore: %v", err)
	}
}

// BenchmarkBuildBatch builds one ~200-byte record, the append path's
// per-record cost outside the database.
func BenchmarkBuildBatch(b *testing.B) {
	run := NewRunID()
	batch := []Append{{Run: run, Kind: KindRunAdmitted, Fields: []byte(`{"source":"bench","payload":"` + string(make([]byte, 0)) + `xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildBatch(Head{}, 1, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseBatch_RawOfAnotherVersionRefused: a library caller's raw bytes
// with "v" other than RecordVersion used to be stored, and Verify passed the
// journal, while every package of it failed the auditor's body rules for
// good. The append now refuses them, naming the member, as the auditor does.
func TestParseBatch_RawOfAnotherVersionRefused(t *testing.T) {
	run := NewRunID()
	good := Body{Seq: 1, Run: run, Epoch: 3, V: RecordVersion, Kind: "Note", Fields: []byte(`{"a":1}`)}
	for _, tc := range []struct {
		name string
		v    uint16
		ok   bool
	}{
		{"current version", RecordVersion, true},
		{"version 2", 2, false},
		{"version 0", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := good
			b.V = tc.v
			raw, err := EncodeBody(b)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ParseBatch(3, []Append{{Run: run, Raw: raw}})
			if tc.ok {
				if err != nil {
					t.Fatalf("ParseBatch: %v", err)
				}
				return
			}
			var ia *InvalidArgumentError
			if !errors.As(err, &ia) || !strings.Contains(err.Error(), `"v" is`) {
				t.Fatalf("ParseBatch of v=%d: %v, want an InvalidArgumentError naming \"v\"", tc.v, err)
			}
		})
	}
}
