package store

import (
	"context"
	"math"
	"time"
)

// Kinds of witness alarm.
const (
	// AlarmWitnessRolledBack: a witness reported a size below the largest
	// it had cosigned for this log, so it lost or rolled back its state and
	// would cosign a fork of what it cosigned before.
	AlarmWitnessRolledBack = "witness_rolled_back"
)

// A WitnessAlarm is something a witness did that only a person can judge,
// kept with the publication state so that status commands show it after
// the publisher moved on.
type WitnessAlarm struct {
	Witness  string    `json:"witness"`  // the witness's store id (key name+key ID)
	Kind     string    `json:"kind"`     // AlarmWitnessRolledBack
	Reported uint64    `json:"reported"` // the size the witness reported
	Cosigned uint64    `json:"cosigned"` // the largest size it had cosigned for us
	At       time.Time `json:"at"`       // when the publisher saw it
	Detail   string    `json:"detail"`   // one line for the operator
}

// AlarmStore keeps witness alarms. It is beside PublicationStore, not in
// it, so that a store without it still publishes; both runseal backends
// implement it. Alarms are never deleted.
type AlarmStore interface {
	// RecordWitnessAlarm keeps a durably. The same (witness, kind,
	// reported, cosigned) is kept once, with the time of its first sighting.
	RecordWitnessAlarm(ctx context.Context, a WitnessAlarm) error
	// WitnessAlarms returns every alarm kept for the tenant, oldest first.
	WitnessAlarms(ctx context.Context) ([]WitnessAlarm, error)
}

// Validate checks what every backend needs of an alarm: a witness, a kind,
// and sizes a signed 64-bit column holds.
func (a WitnessAlarm) Validate() error {
	if a.Witness == "" || a.Kind == "" {
		return &InvalidArgumentError{Field: "alarm", Detail: "witness and kind are required"}
	}
	if a.Reported > math.MaxInt64 || a.Cosigned > math.MaxInt64 {
		return &InvalidArgumentError{Field: "alarm", Detail: "size above 2^63-1"}
	}
	return nil
}
