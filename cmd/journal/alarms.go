package main

import (
	"context"
	"fmt"
	"io"

	"github.com/runseal/runseal/store"
)

// witnessAlarms returns the witness alarms the publisher kept in js (see
// publish.Publisher), or none for a store that keeps none.
func witnessAlarms(ctx context.Context, js any) ([]store.WitnessAlarm, error) {
	as, ok := js.(store.AlarmStore)
	if !ok {
		return nil, nil
	}
	return as.WitnessAlarms(ctx)
}

// warnAlarms prints one ALARM line per witness alarm on w (stderr), so that
// the note on stdout stays a note.
func warnAlarms(w io.Writer, alarms []store.WitnessAlarm) {
	for _, a := range alarms {
		fmt.Fprintf(w, "ALARM %s %s: %s (reported size %d, had cosigned %d)\n",
			a.At.Format("2006-01-02T15:04:05Z"), a.Witness, a.Kind, a.Reported, a.Cosigned)
	}
}
