package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestEncodeRefusals(t *testing.T) {
	run := NewRunID()
	step := uint32(1)
	tests := []struct {
		name  string
		body  Body
		field string
	}{
		{"fields not an object", Body{Seq: 1, Run: run, Epoch: 1, Kind: "K", Fields: []byte(`"x"`)}, "fields"},
		{"malformed fields", Body{Seq: 1, Run: run, Epoch: 1, Kind: "K", Fields: []byte(`{"a":}`)}, "fields"},
		{"reserved key", Body{Seq: 1, Run: run, Epoch: 1, Kind: "K", Fields: []byte(`{"epoch":2}`)}, "fields.epoch"},
		{"empty kind", Body{Seq: 1, Run: run, Epoch: 1, Step: &step}, "kind"},
		{"bad phase", Body{Seq: 1, Run: run, Epoch: 1, Kind: "K", Phase: "backwards"}, "phase"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EncodeBody(tc.body)
			var ia *InvalidArgumentError
			if !errors.As(err, &ia) || ia.Field != tc.field {
				t.Fatalf("err = %v, want invalid %s", err, tc.field)
			}
		})
	}
	big := Body{Seq: 1, Run: run, Epoch: 1, Kind: "K", Fields: []byte(`{"x":"` + strings.Repeat("a", MaxRecordBytes) + `"}`)}
	var tl *RecordTooLargeError
	if _, err := EncodeBody(big); !errors.As(err, &tl) || tl.Limit != MaxRecordBytes {
		t.Fatalf("oversized body: %v", err)
	}
}

func TestDecodeRecordDetectsTampering(t *testing.T) {
	run := NewRunID()
	recs, err := BuildBatch(Head{}, 1, []Append{{Run: run, Kind: "Note", Fields: []byte(`{"text":"hello"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if _, err := DecodeRecord(run, 1, r.PrevHash, r.Hash, r.Raw); err != nil {
		t.Fatalf("sound record: %v", err)
	}
	tampered := bytes.Replace(r.Raw, []byte("hello"), []byte("HELLO"), 1)
	var c *CorruptError
	if _, err := DecodeRecord(run, 1, r.PrevHash, r.Hash, tampered); !errors.As(err, &c) {
		t.Fatalf("tampered bytes: %v", err)
	}
	if _, err := DecodeRecord(NewRunID(), 1, r.PrevHash, r.Hash, r.Raw); !errors.As(err, &c) {
		t.Fatalf("record filed under another run: %v", err)
	}
	if _, err := DecodeRecord(run, 2, r.PrevHash, r.Hash, r.Raw); !errors.As(err, &c) {
		t.Fatalf("record filed under another seq: %v", err)
	}
}

func TestChainVerifier(t *testing.T) {
	run := NewRunID()
	recs, err := BuildBatch(Head{}, 1, []Append{
		{Run: run, Kind: "A"}, {Run: run, Kind: "B"}, {Run: run, Kind: "C"},
	})
	if err != nil {
		t.Fatal(err)
	}
	records := func() []Record {
		out := make([]Record, len(recs))
		for i, p := range recs {
			out[i] = p.Record
		}
		return out
	}
	tests := []struct {
		name   string
		mutate func([]Record) []Record
		bad    Seq
	}{
		{"sound", func(r []Record) []Record { return r }, 0},
		{"dropped middle", func(r []Record) []Record { return []Record{r[0], r[2]} }, 3},
		{"swapped", func(r []Record) []Record { return []Record{r[1], r[0], r[2]} }, 2},
		{"broken link", func(r []Record) []Record { r[1].PrevHash[0] ^= 1; return r }, 2},
		{"rewritten bytes", func(r []Record) []Record {
			r[2].Raw = bytes.Replace(r[2].Raw, []byte(`"C"`), []byte(`"D"`), 1)
			return r
		}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := NewChainVerifier(run)
			var got error
			for _, r := range tc.mutate(records()) {
				if got = v.Next(r); got != nil {
					break
				}
			}
			if tc.bad == 0 {
				if got != nil {
					t.Fatal(got)
				}
				if v.Head().Seq != 3 || v.Head().Hash != recs[2].Hash {
					t.Fatalf("head %+v", v.Head())
				}
				return
			}
			var c *CorruptError
			if !errors.As(got, &c) || c.Seq != tc.bad {
				t.Fatalf("err = %v, want corrupt at seq %d", got, tc.bad)
			}
		})
	}
}

func TestIDs(t *testing.T) {
	r := NewRunID()
	for _, s := range []string{r.String(), "run_" + r.String()} {
		got, err := ParseRunID(s)
		if err != nil || got != r {
			t.Fatalf("ParseRunID(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "x", strings.ToLower(r.String()), r.String() + "0", "case_" + r.String()} {
		if _, err := ParseRunID(s); err == nil {
			t.Errorf("ParseRunID(%q) accepted", s)
		}
	}
	if _, err := ParseDigest(strings.Repeat("A", 64)); err == nil {
		t.Error("upper-case digest accepted")
	}
	if got := Sum(nil).String(); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("SHA-256 of nothing = %s", got)
	}
}

// FuzzDecodeBody: the record decoder never panics, and whatever it accepts
// re-encodes to exactly the bytes it read.
func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(`{"epoch":1,"kind":"Note","run":"01JD0000000000000000000001","seq":1,"text":"x","v":1}`))
	f.Add([]byte(`{"case":"01JD00000000000000000000C1","effect_key":"abababababababababababababababababababababababababababababababab","epoch":7,"kind":"EffectStarted","phase":"compensating","run":"01JD0000000000000000000001","seq":2,"step":3,"v":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := DecodeBody(raw)
		if err != nil {
			return
		}
		again, err := EncodeBody(b)
		if err != nil {
			t.Fatalf("accepted body does not re-encode: %v", err)
		}
		if !bytes.Equal(again, raw) {
			t.Fatalf("re-encoding differs:\n%s\n%s", raw, again)
		}
	})
}
