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
	at   int64 // what an int64 column scans as
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
		case *int64:
			*d = r.at
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

// TestScanActivity_NegativeTime: a stored negative activity time is
// corruption, never wrapped to a time far in the future.
func TestScanActivity_NegativeTime(t *testing.T) {
	run := NewRunID()
	parse := func(string) (RunID, error) { return run, nil }
	rows := &fakeRows{vals: []any{run.String()}, at: 42}
	rows.Next()
	if a, err := ScanActivity(rows, parse); err != nil || a.Run != run || a.At != 42 {
		t.Fatalf("sound row: %+v, %v", a, err)
	}
	rows = &fakeRows{vals: []any{run.String()}, at: -1}
	rows.Next()
	var c *CorruptError
	if _, err := ScanActivity(rows, parse); !errors.As(err, &c) || c.Run != run {
		t.Fatalf("negative time: %v, want a CorruptError naming the run", err)
	}
	errParse := errors.New("parse")
	rows = &fakeRows{vals: []any{"x"}}
	rows.Next()
	if _, err := ScanActivity(rows, func(string) (RunID, error) { return RunID{}, errParse }); !errors.Is(err, errParse) {
		t.Fatalf("bad id: %v", err)
	}
}
