package store

import (
	"errors"
	"testing"
)

func TestProofSize(t *testing.T) {
	at := func(n uint64) *uint64 { return &n }
	for _, tc := range []struct {
		committed uint64
		at        *uint64
		want      uint64
		beyond    bool
	}{
		{committed: 7, want: 7},
		{committed: 7, at: at(3), want: 3},
		{committed: 7, at: at(7), want: 7},
		{committed: 7, at: at(8), beyond: true},
		{committed: 0, at: at(1), beyond: true},
	} {
		got, err := ProofSize(tc.committed, tc.at)
		if tc.beyond {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("ProofSize(%d, %d) = %d, %v; want ErrInvalidArgument", tc.committed, *tc.at, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ProofSize(%d, %v) = %d, %v; want %d", tc.committed, tc.at, got, err, tc.want)
		}
	}
}
