package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
)

// CheckWitnessAlarms checks a store.AlarmStore on a fresh tenant: alarms
// are kept durably in order, a repeat of one is kept once with its first
// time, and an alarm without a witness or kind is refused.
func CheckWitnessAlarms(t *testing.T, s store.AlarmStore) {
	t.Helper()
	ctx := context.Background()
	if got, err := s.WitnessAlarms(ctx); err != nil || len(got) != 0 {
		t.Fatalf("fresh tenant: alarms %v, %v", got, err)
	}
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	a1 := store.WitnessAlarm{Witness: "w1.example+01020304", Kind: store.AlarmWitnessRolledBack, Reported: 3, Cosigned: 9, At: t0, Detail: "one"}
	a2 := store.WitnessAlarm{Witness: "w2.example+05060708", Kind: store.AlarmWitnessRolledBack, Reported: 0, Cosigned: 9, At: t0.Add(time.Second), Detail: "two"}
	again := a1
	again.At, again.Detail = t0.Add(time.Hour), "again"
	for _, a := range []store.WitnessAlarm{a1, a2, again} {
		if err := s.RecordWitnessAlarm(ctx, a); err != nil {
			t.Fatalf("RecordWitnessAlarm(%+v): %v", a, err)
		}
	}
	got, err := s.WitnessAlarms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].At.Equal(a1.At) || got[0].Detail != "one" || got[0].Witness != a1.Witness ||
		got[0].Reported != 3 || got[0].Cosigned != 9 || got[1].Witness != a2.Witness || got[1].Reported != 0 {
		t.Fatalf("alarms = %+v, want a1 (first sighting) then a2", got)
	}
	var ia *store.InvalidArgumentError
	for _, bad := range []store.WitnessAlarm{{Kind: store.AlarmWitnessRolledBack}, {Witness: "w"}} {
		if err := s.RecordWitnessAlarm(ctx, bad); !errors.As(err, &ia) {
			t.Errorf("RecordWitnessAlarm(%+v) = %v, want InvalidArgumentError", bad, err)
		}
	}
}
