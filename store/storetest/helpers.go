package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/runseal/runseal/store"
)

func note(run store.RunID, text string) store.Append {
	return store.Append{Run: run, Kind: "Note", Fields: []byte(fmt.Sprintf(`{"text":%q}`, text))}
}

func admit(run store.RunID, key, source string) store.Append {
	f := `{}`
	switch {
	case key != "" && source != "":
		f = fmt.Sprintf(`{"admission_key":%q,"source":%q}`, key, source)
	case key != "":
		f = fmt.Sprintf(`{"admission_key":%q}`, key)
	case source != "":
		f = fmt.Sprintf(`{"source":%q}`, source)
	}
	return store.Append{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(f)}
}

func conclude(run store.RunID, outcome string) store.Append {
	return store.Append{Run: run, Kind: store.KindRunConcluded, Fields: []byte(fmt.Sprintf(`{"outcome":%q}`, outcome))}
}

func effectStarted(run store.RunID, key store.Digest) store.Append {
	k := key
	return store.Append{Run: run, Kind: store.KindEffectStarted, EffectKey: &k, Fields: []byte(`{"attempt":1}`)}
}

func suspendUntil(run store.RunID, until time.Time) store.Append {
	return store.Append{Run: run, Kind: store.KindRunSuspended,
		Fields: []byte(fmt.Sprintf(`{"awaiting":"time","until":%q}`, until.UTC().Format(time.RFC3339)))}
}

func suspendEvent(run store.RunID, event string) store.Append {
	return store.Append{Run: run, Kind: store.KindRunSuspended,
		Fields: []byte(fmt.Sprintf(`{"awaiting":"event","event":%q}`, event))}
}

func key(s string) store.Digest { return store.Sum([]byte(s)) }

func (t *T) append(j store.Journal, epoch store.Epoch, batch ...store.Append) []store.Record {
	recs, err := j.Append(t.ctx, epoch, batch)
	if err != nil {
		t.Fatalf("Append(epoch %d, %d records): %v", epoch, len(batch), err)
	}
	if len(recs) != len(batch) {
		t.Fatalf("Append returned %d records for a batch of %d", len(recs), len(batch))
	}
	return recs
}

func (t *T) acquire(j store.Journal, run store.RunID, owner string, ttl time.Duration) store.Lease {
	l, err := j.Acquire(t.ctx, run, owner, ttl)
	if err != nil {
		t.Fatalf("Acquire(%s, %q): %v", run, owner, err)
	}
	return l
}

func (t *T) head(j store.Journal, run store.RunID) store.Head {
	h, err := j.Head(t.ctx, run)
	if err != nil {
		t.Fatalf("Head(%s): %v", run, err)
	}
	return h
}

func (t *T) sealed(j store.Journal, run store.RunID, epoch store.Epoch, outcome string) store.Digest {
	d, err := j.Seal(t.ctx, run, epoch, outcome)
	if err != nil {
		t.Fatalf("Seal(%s, %d, %q): %v", run, epoch, outcome, err)
	}
	return d
}

// concluded appends a conclusion and seals it, returning the leaf.
func (t *T) concludeAndSeal(j store.Journal, run store.RunID, epoch store.Epoch, outcome string) store.Digest {
	t.append(j, epoch, conclude(run, outcome))
	return t.sealed(j, run, epoch, outcome)
}

// expect asserts err is (wraps) an E and returns it.
func expect[E error](t *T, err error, what string) E {
	var e E
	if err == nil {
		t.Fatalf("%s: succeeded, want %T", what, e)
	}
	if !errors.As(err, &e) {
		t.Fatalf("%s: error %v (%T), want %T", what, err, err, e)
	}
	return e
}

func (t *T) runs(got []store.RunID, want ...store.RunID) {
	if len(got) != len(want) {
		t.Fatalf("listing = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("listing = %v, want %v", got, want)
		}
	}
}

func contains(list []store.RunID, r store.RunID) bool {
	for _, x := range list {
		if x == r {
			return true
		}
	}
	return false
}
