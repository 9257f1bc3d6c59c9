package storetest

// Read: reads start where told and pages bound what is read.

import (
	"slices"
	"strings"

	"github.com/runseal/runseal/store"
)

func checkReadFrom(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	t.append(j, 1, note(run, "1"), note(run, "2"), note(run, "3"), note(run, "4"))
	got, err := j.Read(t.ctx, run, 3)
	if err != nil || len(got) != 2 || got[0].Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("Read(from 3) = %d records, %v", len(got), err)
	}
	if got, _ := j.Read(t.ctx, run, 5); len(got) != 0 {
		t.Errorf("Read past the head returned %d records", len(got))
	}
}

func checkReadPage(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	for i := 0; i < 3; i++ {
		t.append(j, 1, note(run, "a"), note(run, "b"))
	}
	got, err := j.ReadPage(t.ctx, run, 2, 3)
	if err != nil || len(got) != 3 || got[0].Seq != 2 || got[2].Seq != 4 {
		t.Fatalf("ReadPage(from 2, limit 3) = %d records, %v", len(got), err)
	}
	var walked []store.Seq
	from := store.Seq(1)
	for {
		page, err := j.ReadPage(t.ctx, run, from, 4)
		if err != nil {
			t.Fatalf("ReadPage: %v", err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			walked = append(walked, r.Seq)
		}
		from = page[len(page)-1].Seq + 1
	}
	if len(walked) != 6 {
		t.Errorf("paging walked %v, want 1..6", walked)
	}
}

func checkReadZero(t *T) {
	j, _ := t.Open()
	_, err := j.Read(t.ctx, store.NewRunID(), 0)
	expect[*store.InvalidArgumentError](t, err, "Read from seq 0")
	_, err = j.ReadPage(t.ctx, store.NewRunID(), 0, 5)
	expect[*store.InvalidArgumentError](t, err, "ReadPage from seq 0")
}

// checkReadStoredBytes: a stored page stops at its byte bound (the first
// record always answered, whatever its size), keeps its count bound, walks
// a run whole when followed, answers the stored bytes that the chain
// hashes, and refuses a bound that is not positive.
func checkReadStoredBytes(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	big := strings.Repeat("x", 1000)
	recs := t.append(j, 1, note(run, big), note(run, big), note(run, big), note(run, "a"), note(run, "b"))
	size := len(recs[0].Raw)
	for _, c := range []struct {
		from         store.Seq
		limit, bytes int
		want         []store.Seq
		next         store.Seq // the record the byte bound left out
	}{
		{1, 10, 2*size + size/2, []store.Seq{1, 2}, 3},
		{1, 10, 2 * size, []store.Seq{1, 2}, 3},
		{1, 10, 1, []store.Seq{1}, 2},        // one record over the bound is still answered
		{2, 1, 10 * size, []store.Seq{2}, 0}, // the count bounds too, and is no byte cut
		{3, 10, size + len(recs[3].Raw) + len(recs[4].Raw), []store.Seq{3, 4, 5}, 0},
		{5, 10, 1, []store.Seq{5}, 0},
		{6, 10, size, nil, 0},
	} {
		got, next, err := j.ReadStored(t.ctx, run, c.from, c.limit, c.bytes)
		if err != nil {
			t.Fatalf("ReadStored(from %d, limit %d, %d bytes): %v", c.from, c.limit, c.bytes, err)
		}
		var seqs []store.Seq
		for _, r := range got {
			seqs = append(seqs, r.Seq)
			if want := recs[r.Seq-1]; string(r.Raw) != string(want.Raw) || r.Hash != want.Hash || r.PrevHash != want.PrevHash {
				t.Errorf("ReadStored seq %d: not the stored bytes and hashes", r.Seq)
			}
		}
		if !slices.Equal(seqs, c.want) || next != c.next {
			t.Errorf("ReadStored(from %d, limit %d, %d bytes) = seqs %v next %d, want %v next %d", c.from, c.limit, c.bytes, seqs, next, c.want, c.next)
		}
	}
	_, _, err := j.ReadStored(t.ctx, run, 1, 10, 0)
	expect[*store.InvalidArgumentError](t, err, "ReadStored with a bound of 0 bytes")
	_, _, err = j.ReadStored(t.ctx, run, 0, 10, size)
	expect[*store.InvalidArgumentError](t, err, "ReadStored from seq 0")
}
