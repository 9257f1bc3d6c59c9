package appendinput

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
)

const run1 = "01J9Z8Q4W5X6Y7Z8A9B0C1D2E3"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		batches  int
		err      string
	}{
		{"one run", `{"run":"` + run1 + `","kind":"RunAdmitted","source":"api"}` + "\n" + `{"run":"` + run1 + `","kind":"Note","text":"x"}`, 1, ""},
		{"blank lines and CRLF", "\r\n" + `{"run":"` + run1 + `","kind":"Note","text":"x"}` + "\r\n\n", 1, ""},
		{"two runs", `{"run":"` + run1 + `","kind":"Note","text":"x"}` + "\n" + `{"run":"01J9Z8Q4W5X6Y7Z8A9B0C1D2E4","kind":"Note","text":"x"}`, 2, ""},
		{"empty", "\n\n", 0, "no records"},
		{"duplicate key", `{"run":"` + run1 + `","kind":"Note","kind":"Note"}`, 0, "line 1: malformed JSON"},
		{"trailing data", `{"run":"` + run1 + `","kind":"Note"} {}`, 0, "line 1: malformed JSON"},
		{"store-assigned seq", `{"run":"` + run1 + `","kind":"Note","seq":1}`, 0, `field "seq"`},
		{"no run", `{"kind":"Note"}`, 0, `field "run": missing`},
		{"bad run quoted short", `{"run":"` + strings.Repeat("Z", 500) + `","kind":"Note"}`, 0, `"...`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, err := Parse(strings.NewReader(tc.in), 1)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				if len(err.Error()) > 300 {
					t.Fatalf("the error echoes the input: %d bytes", len(err.Error()))
				}
				return
			}
			if err != nil || len(bs) != tc.batches {
				t.Fatalf("%d batches, %v", len(bs), err)
			}
		})
	}
}

// TestParse_LineTooLongIsClassed: a line over MaxLineBytes is refused
// without being buffered whole, and callers can tell it (413 over HTTP).
func TestParse_LineTooLongIsClassed(t *testing.T) {
	in := `{"run":"` + run1 + `","kind":"Note","text":"` + strings.Repeat("x", MaxLineBytes) + `"}`
	_, err := Parse(strings.NewReader(in), 1)
	var le *LineError
	if !errors.Is(err, ErrLineTooLong) || !errors.As(err, &le) || le.Line != 1 {
		t.Fatalf("%v", err)
	}
}

// FuzzParse: no input makes Parse panic, and whatever it accepts the
// store's encoder accepts too.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"run":"` + run1 + `","kind":"RunAdmitted","source":"api"}`))
	f.Add([]byte(`{"run":"` + run1 + `","kind":"EffectStarted","effect_key":"` + strings.Repeat("ab", 32) + `","step":1}`))
	f.Add([]byte("{\"run\":\"" + run1 + "\",\"kind\":\"Note\",\"phase\":\"compensating\",\"case\":\"" + run1 + "\"}\n\n{}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		bs, err := Parse(bytes.NewReader(in), 1)
		if err != nil {
			return
		}
		for _, b := range bs {
			if _, err := store.BuildBatch(store.Head{}, 1, b.Appends); err != nil && !errors.As(err, new(*store.InvalidArgumentError)) {
				// A batch of several lines may still be refused as a
				// whole (a second RunAdmitted, say); never otherwise.
				t.Fatalf("accepted input refused by the store: %v", err)
			}
		}
	})
}

// TestSplit_LeavesOneBatchToTheStoreChecksSeveral: Split skips the
// record encoding of a lone batch (the store's Append does it whole) but
// not of several, where a later refusal would follow earlier commits;
// Check then names the line Parse would have named.
func TestSplit_LeavesOneBatchToTheStoreChecksSeveral(t *testing.T) {
	const run2 = "01J9Z8Q4W5X6Y7Z8A9B0C1D2E4"
	good := `{"run":"` + run1 + `","kind":"Note","text":"x"}` + "\n"
	bad := `{"run":"` + run1 + `","kind":"Bad Kind!"}` + "\n"
	other := `{"run":"` + run2 + `","kind":"Note","text":"x"}` + "\n"

	bs, err := Split(strings.NewReader(good+bad), 1)
	if err != nil || len(bs) != 1 {
		t.Fatalf("one batch: %d batches, %v; want it left to the store", len(bs), err)
	}
	var le *LineError
	if err := Check(bs, 1); !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("Check: %v, want a LineError for line 2", err)
	}
	if _, err := Parse(strings.NewReader(good+bad), 1); !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("Parse: %v, want a LineError for line 2", err)
	}
	if _, err := Split(strings.NewReader(other+good+bad), 1); !errors.As(err, &le) || le.Line != 3 {
		t.Fatalf("two batches: %v, want a LineError for line 3", err)
	}
	if bs, err := Split(strings.NewReader(other+good), 1); err != nil || len(bs) != 2 || Check(bs, 1) != nil {
		t.Fatalf("two good batches: %d, %v", len(bs), err)
	}
}
