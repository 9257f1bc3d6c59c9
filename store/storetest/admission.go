package storetest

// Admission: one admission key admits one run, claimed by the append that writes it.

import (
	"errors"
	"sync"
	"time"

	"github.com/runseal/runseal/store"
)

func checkAdmitsOne(t *T) {
	j, _ := t.Open()
	r1, r2 := store.NewRunID(), store.NewRunID()
	t.append(j, 1, admit(r1, "order-42", "shop"))
	_, err := j.Append(t.ctx, 1, []store.Append{admit(r2, "order-42", "shop")})
	d := expect[*store.DuplicateAdmissionError](t, err, "second admission with one key")
	if d.Holder != r1 || d.Key != "order-42" {
		t.Errorf("DuplicateAdmission = %+v, want holder %s", d, r1)
	}
	if t.head(j, r2).Seq != 0 {
		t.Errorf("refused admission wrote its run")
	}
}

func checkAdmissionClaimed(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	if _, ok, err := j.AdmittedAs(t.ctx, "k"); err != nil || ok {
		t.Fatalf("AdmittedAs before any admission = %v, %v", ok, err)
	}
	t.append(j, 1, admit(run, "k", ""))
	got, ok, err := j.AdmittedAs(t.ctx, "k")
	if err != nil || !ok || got != run {
		t.Errorf("AdmittedAs = %s, %v, %v, want %s", got, ok, err, run)
	}
}

func checkAdmissionRefusedFree(t *T) {
	j, _ := t.Open()
	run := store.NewRunID()
	_, err := j.Append(t.ctx, 1, []store.Append{admit(run, "k", ""), {Run: run, Kind: "Note", Fields: []byte(`{"seq":1}`)}})
	if err == nil {
		t.Fatalf("batch with an invalid record accepted")
	}
	if _, ok, _ := j.AdmittedAs(t.ctx, "k"); ok {
		t.Fatalf("refused admission holds its key")
	}
	t.append(j, 1, admit(store.NewRunID(), "k", ""))
}

func checkUnkeyed(t *T) {
	j, _ := t.Open()
	t.append(j, 1, admit(store.NewRunID(), "", ""))
	t.append(j, 1, admit(store.NewRunID(), "", ""))
	if _, ok, _ := j.AdmittedAs(t.ctx, "x"); ok {
		t.Errorf("an unkeyed admission claimed a key")
	}
}

func checkForget(t *T) {
	j, clk := t.Open()
	run := store.NewRunID()
	t.append(j, 1, admit(run, "k", ""))
	clk.Advance(2 * time.Second)
	cut := time.Now().Add(24 * time.Hour) // after any store's claim time
	if fc, ok := clk.(*FakeClock); ok {
		cut = fc.Now()
	}
	n, err := j.ForgetAdmissions(t.ctx, cut)
	if err != nil || n != 1 {
		t.Fatalf("ForgetAdmissions = %d, %v, want 1", n, err)
	}
	if _, ok, _ := j.AdmittedAs(t.ctx, "k"); ok {
		t.Errorf("forgotten key still held")
	}
	if recs, _ := j.Read(t.ctx, run, 1); len(recs) != 1 {
		t.Errorf("forgetting a key touched the run's records")
	}
	t.append(j, 1, admit(store.NewRunID(), "k", ""))
	if n, _ := j.ForgetAdmissions(t.ctx, time.Unix(0, 0)); n != 0 {
		t.Errorf("ForgetAdmissions(epoch 0) retired %d keys", n)
	}
}

func checkAdmissionRace(t *T) {
	j, _ := t.Open()
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := j.Append(t.ctx, 1, []store.Append{admit(store.NewRunID(), "race", "")})
			mu.Lock()
			defer mu.Unlock()
			var d *store.DuplicateAdmissionError
			switch {
			case err == nil:
				winners++
			case !errors.As(err, &d):
				t.Errorf("racing admission: %v", err)
			}
		}()
	}
	wg.Wait()
	if winners != 1 {
		t.Errorf("%d racing admissions won, want exactly 1", winners)
	}
}
