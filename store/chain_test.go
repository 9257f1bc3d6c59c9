package store

import (
	"errors"
	"testing"
)

// TestChainCheck_RangeRead: rows read from the middle of a run are checked
// for gaps, hash sizes and links, and a record spliced in from another
// chain of the same run (sound on its own) is refused at its seq.
func TestChainCheck_RangeRead(t *testing.T) {
	run := NewRunID()
	build := func(kinds ...string) []Record {
		t.Helper()
		var in []Append
		for _, k := range kinds {
			in = append(in, Append{Run: run, Kind: k})
		}
		recs, err := BuildBatch(Head{}, 1, in)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]Record, len(recs))
		for i, p := range recs {
			out[i] = p.Record
		}
		return out
	}
	a := build("A", "B", "C", "D")
	other := build("A", "X", "C", "D") // seq 3 onward links to X, not B
	tests := []struct {
		name string
		rows []Record
		hash func(Record) []byte
		bad  Seq // 0: sound
	}{
		{"sound from seq 2", []Record{a[1], a[2], a[3]}, nil, 0},
		{"first row not at from", []Record{a[2], a[3]}, nil, 2},
		{"gap", []Record{a[1], a[3]}, nil, 3},
		{"spliced record", []Record{a[1], other[2], other[3]}, nil, 3},
		{"short stored hash", []Record{a[1], a[2]}, func(r Record) []byte {
			if r.Seq == 3 {
				return r.Hash[:31]
			}
			return r.Hash[:]
		}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChainCheck(run, 2)
			var err error
			for _, r := range tc.rows {
				h := r.Hash[:]
				if tc.hash != nil {
					h = tc.hash(r)
				}
				var got Record
				if got, err = c.Next(int64(r.Seq), r.PrevHash[:], h, r.Raw); err != nil {
					break
				}
				if got.Hash != r.Hash || got.Seq != r.Seq {
					t.Fatalf("decoded seq %d hash %x, want seq %d", got.Seq, got.Hash, r.Seq)
				}
			}
			if tc.bad == 0 {
				if err != nil || c.Expect() != 5 {
					t.Fatalf("err %v, next seq %d; want nil, 5", err, c.Expect())
				}
				return
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Seq != tc.bad {
				t.Fatalf("err = %v, want corrupt at seq %d", err, tc.bad)
			}
		})
	}
}
