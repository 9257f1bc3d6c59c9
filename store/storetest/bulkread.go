package storetest

// Bulk reads: a store.BulkReader (optional) reads a tenant's runs in pages
// that, put together, are exactly the runs, heads, log positions and
// records the per-run reads give, whatever the page's limits; and a record
// whose run row is missing is refused, not skipped.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/runseal/runseal/store"
)

// scannedRun is a run as a whole scan put it together.
type scannedRun struct {
	head store.Head
	log  *store.Position
	recs []store.PagedRecord
}

// scanAll reads every page of br from the start with the given limits and
// puts the runs together, checking the cursor and Done as it goes.
func (t *T) scanAll(br store.BulkReader, limit, maxBytes int) ([]store.RunID, map[store.RunID]*scannedRun, error) {
	var order []store.RunID
	runs := map[store.RunID]*scannedRun{}
	var at store.RunCursor
	page := &store.RunsPage{}
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("ScanRuns(limit %d, maxBytes %d) does not end", limit, maxBytes)
		}
		if err := br.ScanRuns(t.ctx, page, at, limit, maxBytes); err != nil {
			return nil, nil, err
		}
		n := 0
		for _, r := range page.Runs {
			n += len(r.Records)
			s, seen := runs[r.Run]
			if !seen {
				s = &scannedRun{head: r.Head, log: r.Log}
				runs[r.Run] = s
				order = append(order, r.Run)
			}
			for _, rec := range r.Records {
				rec.Raw = bytes.Clone(rec.Raw) // the page's memory is reused
				s.recs = append(s.recs, rec)
			}
		}
		if n > limit {
			t.Errorf("ScanRuns(limit %d) returned %d records", limit, n)
		}
		if page.Done {
			return order, runs, nil
		}
		if n == 0 || page.Next == at {
			t.Fatalf("ScanRuns(limit %d, maxBytes %d) after %+v: a page that is not the last did not advance", limit, maxBytes, at)
		}
		at = page.Next
	}
}

func checkBulkScanRuns(t *T) {
	j, _ := t.Open()
	br, ok := j.(store.BulkReader)
	if !ok {
		return // optional interface
	}
	page := &store.RunsPage{}
	if err := br.ScanRuns(t.ctx, page, store.RunCursor{}, 10, 1<<20); err != nil || !page.Done || len(page.Runs) != 0 {
		t.Fatalf("ScanRuns of an empty journal: %+v %v", page, err)
	}
	// Runs of 1 to 7 records, every third sealed, every third concluded
	// but open, the rest open without a conclusion.
	var ids []store.RunID
	for i := range 12 {
		run := store.NewRunID()
		ids = append(ids, run)
		var batch []store.Append
		for k := range i%7 + 1 {
			batch = append(batch, note(run, fmt.Sprintf("run %d record %d %s", i, k, bytes.Repeat([]byte("x"), 10*i))))
		}
		t.append(j, 1, batch...)
		switch i % 3 {
		case 0:
			t.concludeAndSeal(j, run, 1, "succeeded")
		case 1:
			t.append(j, 1, conclude(run, "failed"))
		}
	}
	slices.SortFunc(ids, func(a, b store.RunID) int { return bytes.Compare(a[:], b[:]) })
	pos, err := j.LogPositions(t.ctx, ids)
	if err != nil {
		t.Fatalf("LogPositions: %v", err)
	}
	for _, lim := range []struct{ limit, maxBytes int }{{1, 1 << 20}, {3, 1 << 20}, {5, 100}, {10000, 1}, {10000, 1 << 20}} {
		order, runs, err := t.scanAll(br, lim.limit, lim.maxBytes)
		if err != nil {
			t.Fatalf("ScanRuns(limit %d, maxBytes %d): %v", lim.limit, lim.maxBytes, err)
		}
		if !slices.Equal(order, ids) {
			t.Fatalf("ScanRuns(limit %d, maxBytes %d) read runs %v, want %v", lim.limit, lim.maxBytes, order, ids)
		}
		for i, run := range ids {
			s := runs[run]
			want := t.read(j, run)
			if h := t.head(j, run); s.head != h {
				t.Errorf("run %s: scanned head %+v, Head says %+v", run, s.head, h)
			}
			if (s.log == nil) != (pos[i] == nil) || s.log != nil && *s.log != *pos[i] {
				t.Errorf("run %s: scanned log position %+v, LogPositions says %+v", run, s.log, pos[i])
			}
			if len(s.recs) != len(want) {
				t.Fatalf("run %s (limit %d, maxBytes %d): scanned %d records, Read gives %d", run, lim.limit, lim.maxBytes, len(s.recs), len(want))
			}
			for k, r := range want {
				got := s.recs[k]
				if got.Seq != r.Seq || got.Hash != r.Hash || !bytes.Equal(got.Raw, r.Raw) || got.Concluded != (r.Kind == store.KindRunConcluded) {
					t.Errorf("run %s seq %d: scanned %+v, Read gives seq %d kind %s", run, r.Seq, got, r.Seq, r.Kind)
				}
			}
		}
	}
	if err := br.ScanRuns(t.ctx, page, store.RunCursor{}, 0, 1); err == nil {
		t.Errorf("ScanRuns with limit 0 succeeded")
	}
	if err := br.ScanRuns(t.ctx, page, store.RunCursor{}, 1, 0); err == nil {
		t.Errorf("ScanRuns with maxBytes 0 succeeded")
	}
}

// checkBulkScanMissingRunRow deletes a run's row: its records remain, and
// a scan that skipped them would export a journal without the run.
func checkBulkScanMissingRunRow(t *T) {
	j, _ := t.Open()
	br, ok := j.(store.BulkReader)
	if !ok {
		return
	}
	a, b := store.NewRunID(), store.NewRunID()
	t.append(j, 1, note(a, "a"))
	t.append(j, 1, note(b, "b"), note(b, "b2"))
	t.tamper(j, `DELETE FROM runs WHERE tenant = ? AND run = ?`, j.Tenant(), a.String())
	_, _, err := t.scanAll(br, 10, 1<<20)
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("ScanRuns over a run without its row: %v, want ErrCorrupt", err)
	}
}
