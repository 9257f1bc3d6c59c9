package store

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// TestParsedBuild_SplicedSeqIsTheEncoding: Build writes a fresh record's
// bytes by putting the seq's digits between the two parts ParseBatch
// encoded once. At every seq, across digit counts, they must be exactly
// EncodeBody's bytes for that body, and decode to the record's Body.
func TestParsedBuild_SplicedSeqIsTheEncoding(t *testing.T) {
	run, cs := NewRunID(), NewCaseID()
	step := uint32(3)
	key := Sum([]byte("k"))
	batch := []Append{
		// "seq" sorts among these fields and inside nested objects.
		{Run: run, Case: cs, Kind: "Note", Fields: []byte(`{"r":1,"sep":"\"seq\":1","seqs":{"seq":5},"s":[{"seq":0}]}`)},
		{Run: run, Step: &step, EffectKey: &key, Phase: Compensating, Kind: KindEffectStarted},
		{Run: run, Kind: "Z"},
	}
	p, err := ParseBatch(9, batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, head := range []Seq{0, 8, 9, 98, 99999, 1<<53 + 1, 1<<64 - 4} {
		ps, err := p.Build(Head{Seq: head})
		if err != nil {
			t.Fatalf("head %d: %v", head, err)
		}
		for i, pr := range ps {
			a := batch[i]
			want, err := EncodeBody(Body{Seq: head + Seq(i) + 1, Run: run, Case: a.Case, Step: a.Step, Phase: a.Phase, EffectKey: a.EffectKey, Epoch: 9, V: RecordVersion, Kind: a.Kind, Fields: a.Fields})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(pr.Raw, want) {
				t.Errorf("head %d record %d:\n built %s\n want  %s", head, i, pr.Raw, want)
			}
			b, err := DecodeBody(pr.Raw)
			if err != nil || !reflect.DeepEqual(b, pr.Body) {
				t.Errorf("head %d record %d: decodes to %+v (%v), built %+v", head, i, b, err, pr.Body)
			}
		}
	}
}

// TestParsedBuild_RestoredBytesMustTakeTheAssignedSeq: a restored append's
// position is checked against the head when the batch is built, so a
// parsed batch built on a moved head is refused with the seq the store
// assigns (the sealing decorator reads it to seal again on the new head).
func TestParsedBuild_RestoredBytesMustTakeTheAssignedSeq(t *testing.T) {
	run := NewRunID()
	raw, err := EncodeBody(Body{Seq: 5, Run: run, Epoch: 2, V: RecordVersion, Kind: "Note", Fields: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseBatch(2, []Append{{Run: run, Raw: raw}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Build(Head{Seq: 4}); err != nil {
		t.Fatalf("at its seq: %v", err)
	}
	_, err = p.Build(Head{Seq: 6})
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) || ia.Field != "batch[0].raw" || !bytes.Contains([]byte(ia.Detail), []byte("the store assigns run "+run.String()+" seq 7")) {
		t.Fatalf("moved head: %v", err)
	}
}

// BenchmarkParsedBuild is what the single writer does per record once the
// caller has parsed the batch: splice the seq, hash.
func BenchmarkParsedBuild(b *testing.B) {
	run := NewRunID()
	p, err := ParseBatch(1, []Append{{Run: run, Kind: KindRunAdmitted, Fields: []byte(`{"source":"bench","payload":"` + string(bytes.Repeat([]byte("x"), 120)) + `"}`)}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Build(Head{Seq: 41}); err != nil {
			b.Fatal(err)
		}
	}
}
