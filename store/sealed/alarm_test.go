package sealed_test

import (
	"context"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// TestSealedJournalKeepsWitnessAlarms: journal serve --keyring wraps each
// store in the sealing decorator, and the publisher keeps a witness's
// rollback alarm only if the store it holds is a store.AlarmStore. The
// decorator once hid it, so the alarm was logged and then lost.
func TestSealedJournalKeepsWitnessAlarms(t *testing.T) {
	ctx := context.Background()
	raw, _ := openSQLite(t)
	j := sealed.New(raw, openRing(t), sealed.Options{})
	as, ok := any(j).(store.AlarmStore)
	if !ok {
		t.Fatal("the sealing decorator is not a store.AlarmStore")
	}
	a := store.WitnessAlarm{Witness: "w+01020304", Kind: store.AlarmWitnessRolledBack, Reported: 3, Cosigned: 9,
		At: time.Unix(1700000000, 0).UTC(), Detail: "rolled back"}
	if err := as.RecordWitnessAlarm(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := raw.WitnessAlarms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Witness != a.Witness || got[0].Reported != 3 || got[0].Cosigned != 9 {
		t.Fatalf("the backend kept %+v, want the one alarm recorded through the decorator", got)
	}
	through, err := as.WitnessAlarms(ctx)
	if err != nil || len(through) != 1 {
		t.Fatalf("WitnessAlarms through the decorator = %+v, %v", through, err)
	}
}
