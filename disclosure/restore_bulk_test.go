package disclosure

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/faulty"
	"github.com/runseal/runseal/store/sqlite"
)

// stopAfterBulk lets n bulk writes (appends or seals) through and then
// fails the next, as a restore killed between two of its bulk
// transactions leaves the target. Ops counts the bulk writes made.
func stopAfterBulk(target *sqlite.Store, n int) *faulty.BulkJournal {
	return faulty.NewBulk(target, faulty.Options{Seed: uint64(n), Only: []string{"AppendBulk", "SealBulk"}, Trace: true,
		At: map[uint64]faulty.Fault{uint64(n) + 1: faulty.FailBeforeCommit}})
}

// Issue 17: a restore through a store.BulkWriter writes many runs per
// transaction, two at a time here; interrupted after any bulk (between
// bulks of appends, between bulks of seals), it is finished by a resumed
// restore, itself in bulks, with no run duplicated.
func TestRestore_ResumeAfterInterruptedBulk(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	want, _ := w.j.Checkpoint(ctx)
	opts := RestoreOptions{BulkRuns: 2, BulkSeals: 2}
	var phases []string
	for n := 0; ; n++ {
		target := openJournal(t, testOrigin)
		stop := stopAfterBulk(target, n)
		rep, err := RestoreWith(ctx, stop, bytes.NewReader(exp), opts)
		if err == nil {
			// 5 runs in bulks of at most 2 (a run's second epoch
			// starts a bulk), 3 leaves in bulks of 2.
			if writes := len(stop.Ops()); writes < 5 || !rep.Faithful() {
				t.Fatalf("the whole restore took %d bulk writes, report %+v", writes, rep)
			}
			break
		}
		var ie *faulty.InjectedError
		if !errors.As(err, &ie) || ie.Op != uint64(n)+1 || !strings.HasSuffix(ie.Method, "Bulk") {
			t.Fatalf("after %d bulk writes: %v", n, err)
		}
		if n > 0 {
			_, err = Restore(ctx, target, bytes.NewReader(exp))
			var rr *RestoreRefusedError
			if !errors.As(err, &rr) || !strings.Contains(err.Error(), "resume it") {
				t.Fatalf("after %d bulk writes, a plain restore of the partial target: %v", n, err)
			}
		}
		resume := opts
		resume.Resume = true
		resume.Progress = func(p RestoreProgress) {
			if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
				phases = append(phases, p.Phase)
			}
		}
		phases = phases[:0]
		rep, err = RestoreWith(ctx, target, bytes.NewReader(exp), resume)
		if err != nil {
			t.Fatalf("resume after %d bulk writes: %v", n, err)
		}
		if !rep.Faithful() || rep.Rebuilt != want || rep.Runs != 5 || rep.Records != 16 || rep.Sealed != 3 {
			t.Fatalf("resume after %d bulk writes: report %+v", n, rep)
		}
		exp2 := export(t, target)
		if !bytes.Equal(exp[bytes.IndexByte(exp, '\n'):], exp2[bytes.IndexByte(exp2, '\n'):]) {
			t.Fatalf("resume after %d bulk writes: the restored journal's export differs", n)
		}
		if last := phases[len(phases)-1]; last != PhaseSealing {
			t.Fatalf("resume after %d bulk writes: progress phases %v", n, phases)
		}
	}
}

// Issue 17, bad input: an export whose runs were reordered (two whole run
// blocks swapped, each still a sound chain) is refused before anything is
// written, and a target holding an exported run is refused naming that
// run, the first one in the export it holds.
func TestRestore_ReorderedRunsAndHeldRunNamed(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	exp := export(t, w.j)
	ls := lines(exp)
	var blocks [][2]int // [start, end) of each run block with its records
	for i, l := range ls {
		if bytes.Contains(l, []byte(`"kind":"`+KindExportRun+`"`)) {
			if len(blocks) > 0 {
				blocks[len(blocks)-1][1] = i
			}
			blocks = append(blocks, [2]int{i, len(ls) - 1})
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("%d run blocks", len(blocks))
	}
	a, b := blocks[0], blocks[1]
	swapped := append(append(append(append([][]byte{}, ls[:a[0]]...), ls[b[0]:b[1]]...), ls[a[0]:a[1]]...), ls[b[1]:]...)
	target := openJournal(t, testOrigin)
	_, err := Restore(ctx, target, bytes.NewReader(join(swapped)))
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "strictly ascending") {
		t.Fatalf("reordered runs: %v", err)
	}
	if runs, _ := target.RunsByID(ctx, nil, 10); len(runs) != 0 {
		t.Fatalf("a refused restore wrote %d runs", len(runs))
	}

	// The target holds C and E (and an unrelated run before them): C,
	// the first of them in the export, is named.
	holds := openJournal(t, testOrigin)
	appendAll(t, holds, 1, noteRec(runID(0x01), store.CaseID{}, "unrelated"))
	appendAll(t, holds, 1, noteRec(w.E, store.CaseID{}, "mine"))
	appendAll(t, holds, 1, noteRec(w.C, store.CaseID{}, "mine"))
	first := w.C
	if bytes.Compare(w.E[:], w.C[:]) < 0 {
		first = w.E
	}
	_, err = Restore(ctx, holds, bytes.NewReader(exp))
	var rr *RestoreRefusedError
	if !errors.As(err, &rr) || !strings.Contains(err.Error(), "already holds run "+first.String()) {
		t.Fatalf("a target holding runs C and E: %v, want run %s named", err, first)
	}
}

// A negative bulk size would never fill a bulk of seals, holding every
// seal in memory: it is refused before anything is read.
func TestRestoreWith_NegativeBulkSizeRefused(t *testing.T) {
	ctx := context.Background()
	exp := export(t, newWorld(t).j)
	for _, opts := range []RestoreOptions{{BulkRuns: -1}, {BulkSeals: -1}} {
		target := openJournal(t, testOrigin)
		_, err := RestoreWith(ctx, target, bytes.NewReader(exp), opts)
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("%+v: %v, want store.ErrInvalidArgument", opts, err)
		}
		if runs, _ := target.RunsByID(ctx, nil, 1); len(runs) != 0 {
			t.Fatalf("%+v: wrote %d runs", opts, len(runs))
		}
	}
}
