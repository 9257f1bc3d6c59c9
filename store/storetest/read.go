package storetest

// Read: reads start where told and pages bound what is read.

import (
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
