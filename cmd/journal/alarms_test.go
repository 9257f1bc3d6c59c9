package main

import (
	"context"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestWitnessedShowsWitnessRollbackAlarm: an alarm the publisher kept for a
// witness that lost or rolled back its state is shown by "journal
// witnessed", even when nothing is witnessed yet.
func TestWitnessedShowsWitnessRollbackAlarm(t *testing.T) {
	db := newJournal(t)
	s := openStore(t, db, nil)
	if err := s.RecordWitnessAlarm(context.Background(), store.WitnessAlarm{
		Witness: "w1.example+01020304", Kind: store.AlarmWitnessRolledBack, Reported: 0, Cosigned: 7, Detail: "lost state",
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := cli(t, db, "", "witnessed")
	if !strings.Contains(r.stderr, "ALARM") || !strings.Contains(r.stderr, "w1.example+01020304") ||
		!strings.Contains(r.stderr, store.AlarmWitnessRolledBack) || !strings.Contains(r.stderr, "had cosigned 7") {
		t.Fatalf("journal witnessed: exit %d, stderr %q; want the alarm", r.code, r.stderr)
	}
}
