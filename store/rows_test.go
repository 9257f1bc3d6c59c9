package store

import (
	"errors"
	"fmt"
	"testing"
)

// fakeRows yields vals as one-column rows, then err from Err; a val that
// is an error fails that row's Scan.
type fakeRows struct {
	vals []any
	i    int
	err  error
}

func (r *fakeRows) Next() bool { r.i++; return r.i <= len(r.vals) }
func (r *fakeRows) Err() error { return r.err }
func (r *fakeRows) Scan(dest ...any) error {
	v := r.vals[r.i-1]
	if err, ok := v.(error); ok {
		return err
	}
	for _, d := range dest {
		switch d := d.(type) {
		case *string:
			*d = fmt.Sprint(v)
		case *[]byte:
			*d = []byte("line " + fmt.Sprint(v))
		}
	}
	return nil
}

func scanString(r Rows) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}

func TestCollectRows(t *testing.T) {
	errScan, errIter := errors.New("scan"), errors.New("iterate")
	tests := []struct {
		name    string
		rows    *fakeRows
		want    []string
		wantErr error
	}{
		{"no rows is empty, not nil", &fakeRows{}, []string{}, nil},
		{"rows in order", &fakeRows{vals: []any{"a", "b", "c"}}, []string{"a", "b", "c"}, nil},
		{"a scan error stops", &fakeRows{vals: []any{"a", errScan, "c"}}, nil, errScan},
		{"an iteration error is returned", &fakeRows{vals: []any{"a"}, err: errIter}, nil, errIter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CollectRows(tc.rows, scanString)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestCollectCosignatures(t *testing.T) {
	got, err := CollectCosignatures(&fakeRows{vals: []any{"w1", "w2"}})
	if err != nil || len(got) != 2 || string(got["w1"]) != "line w1" || string(got["w2"]) != "line w2" {
		t.Fatalf("got %q, %v", got, err)
	}
	errScan := errors.New("scan")
	if _, err := CollectCosignatures(&fakeRows{vals: []any{"w1", errScan}}); !errors.Is(err, errScan) {
		t.Errorf("scan error: got %v", err)
	}
}
