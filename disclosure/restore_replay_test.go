package disclosure

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
)

// changingFile serves one export to a restore's first reading and another
// from the second rewind on: a file replaced between the two readings.
type changingFile struct {
	r       *bytes.Reader
	second  []byte
	rewinds int
}

func (f *changingFile) Read(p []byte) (int, error) { return f.r.Read(p) }

func (f *changingFile) Seek(off int64, whence int) (int64, error) {
	if off == 0 && whence == io.SeekStart {
		if f.rewinds++; f.rewinds == 2 {
			f.r = bytes.NewReader(f.second)
		}
	}
	return f.r.Seek(off, whence)
}

// rewriteRecord replaces old with new in the raw bytes of run's record seq
// and, when rehash, sets the line's hash to the chain hash of the new
// bytes (the record before it keeps its hash, so the chain still links).
func rewriteRecord(t *testing.T, exp []byte, run store.RunID, seq store.Seq, old, new string, rehash bool) []byte {
	t.Helper()
	ls := lines(exp)
	prev := store.ZeroDigest
	for i, l := range ls {
		claimed, raw, err := parseRecordLine(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			continue
		}
		body, _, err := decodeRecordBody(raw)
		if err != nil || body.Run != run {
			prev = claimed
			continue
		}
		if body.Seq != seq {
			prev = claimed
			continue
		}
		changed := bytes.Replace(raw, []byte(old), []byte(new), 1)
		if bytes.Equal(changed, raw) {
			t.Fatalf("run %s seq %d has no %q", run, seq, old)
		}
		h := claimed
		if rehash {
			h = store.ChainHash(prev, changed)
		}
		ls[i] = []byte(fmt.Sprintf("{\"hash\":\"%s\",\"raw\":%s}\n", h, changed))
		return join(ls)
	}
	t.Fatalf("no record %d of run %s", seq, run)
	return nil
}

// The second reading decodes of each record only its epoch and leaves the
// rest to the store's append: an export replaced between the readings
// must still fail the restore, never pass as faithful. Run C is unsealed,
// so no seal's leaf would catch a change to it.
func TestRestore_ExportChangedBetweenReadings(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	for _, tc := range []struct {
		name, want string
		second     []byte
	}{
		{"bytes changed, hash kept", "the bytes hash to",
			rewriteRecord(t, exp, w.C, 3, `"outcome":"failed"`, `"outcome":"faileX"`, false)},
		{"epoch changed, chain rehashed", "changed between its two readings",
			rewriteRecord(t, exp, w.C, 3, `"epoch":3`, `"epoch":4`, true)},
		{"another run named, chain rehashed", "bytes name run",
			rewriteRecord(t, exp, w.C, 3, `"run":"`+w.C.String(), `"run":"`+w.D.String(), true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := openJournal(t, testOrigin)
			rep, err := Restore(ctx, target, &changingFile{r: bytes.NewReader(exp), second: tc.second})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore of a file replaced between readings: %v (report %+v), want an error with %q", err, rep, tc.want)
			}
		})
	}
}

// The seals run beside the appends, before the second reading's digest
// is known: a sealed run replaced between the readings (its chain
// rehashed, so every append passes) must not be sealed with its new head.
// Each bulk seal names the export's leaf, which the store checks before
// the seal commits.
func TestRestore_SealedRunChangedBetweenReadingsNotSealed(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	second := rewriteRecord(t, exp, w.B, 3, `"epoch":1`, `"epoch":2`, true)
	target := openJournal(t, testOrigin)
	rep, err := RestoreWith(ctx, target, &changingFile{r: bytes.NewReader(exp), second: second}, RestoreOptions{BulkRuns: 1, BulkSeals: 1})
	if err == nil {
		t.Fatalf("restore of a file whose sealed run B changed between readings succeeded: %+v", rep)
	}
	ps, perr := target.LogPositions(ctx, []store.RunID{w.B})
	if perr != nil {
		t.Fatal(perr)
	}
	if ps[0] != nil {
		t.Fatalf("run B was sealed at %+v from bytes the export's log does not hold (restore error: %v)", ps[0], err)
	}
}
