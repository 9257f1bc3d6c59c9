package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/store"
)

// TestAppendedJSON_SameBytesAsEncodingJSON: the append answer is written
// without encoding/json; a client must get exactly the bytes it always got.
func TestAppendedJSON_SameBytesAsEncodingJSON(t *testing.T) {
	var run store.RunID
	for i := range run {
		run[i] = byte(0xf0 + i)
	}
	var h store.Digest
	for i := range h {
		h[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name string
		a    api.Appended
	}{
		{"nil", api.Appended{}},
		{"empty", api.Appended{Records: []api.Ack{}}},
		{"one", api.Appended{Records: []api.Ack{{Line: 1, Run: run, Seq: 1, Hash: h}}}},
		{"many", api.Appended{Records: []api.Ack{{Line: 3, Run: run, Seq: 41, Hash: h}, {Line: 1 << 30, Run: store.RunID{}, Seq: 1<<62 - 1, Hash: store.Digest{}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(tc.a); err != nil {
				t.Fatal(err)
			}
			if got := appendJSON(nil, tc.a); !bytes.Equal(got, want.Bytes()) {
				t.Errorf("appendJSON:\n got %s\nwant %s", got, want.Bytes())
			}
		})
	}
}

// TestAppend_BadRecordNamesItsLineAndWritesNothing: the server leaves a
// lone batch's encoding to the store (appendinput.Split); a record the
// store refuses must still be named by its input line, and nothing of the
// body written, whether the body is one batch or several.
func TestAppend_BadRecordNamesItsLineAndWritesNothing(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	a, b := store.NewRunID(), store.NewRunID()
	la, err := ts.c.Acquire(ctx, a, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.c.Acquire(ctx, b, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	bad := line(a, "Bad Kind!", "")
	for _, tc := range []struct {
		name, body, want string
	}{
		{"one batch", line(a, "RunAdmitted", `"source":"api"`) + line(a, "Note", `"text":"x"`) + bad, "line 3: "},
		{"two batches", line(b, "RunAdmitted", `"source":"api"`) + line(a, "RunAdmitted", `"source":"api"`) + bad, "line 3: "},
		{"bad first", bad + line(a, "Note", `"text":"x"`), "line 1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := ts.do("POST", "/v1/append?epoch="+strconv.FormatUint(uint64(la.Epoch), 10), tc.body)
			if code != http.StatusBadRequest || !strings.Contains(body, tc.want) || !strings.Contains(body, "nothing was written") {
				t.Fatalf("%d %s, want 400 naming %q and saying nothing was written", code, body, tc.want)
			}
			for _, run := range []store.RunID{a, b} {
				if h, err := ts.st.Head(ctx, run); err != nil || h.Seq != 0 {
					t.Fatalf("after the refusal run %s has a head: %+v %v", run, h, err)
				}
			}
		})
	}
}
