package store

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/runseal/runseal/internal/canon"
)

// Basis says how an operator's identity was established.
type Basis string

// The bases an Operator may carry.
const (
	Authenticated Basis = "authenticated" // proven by a credential the service checked
	Asserted      Basis = "asserted"      // claimed by the caller, not proven
	Connected     Basis = "connected"     // inferred from the connection (a local socket, say)
)

// Operator is a person or service acting on a run from outside its chain,
// such as the asker of a cancellation.
type Operator struct {
	Actor string `json:"actor"`
	Basis Basis  `json:"basis"`
}

// Validate refuses a blank or oversized actor and an unknown basis.
func (o Operator) Validate() error {
	if o.Actor == "" || len(o.Actor) > 256 || !utf8.ValidString(o.Actor) {
		return &InvalidArgumentError{Field: "actor", Detail: "must be 1 to 256 bytes of UTF-8"}
	}
	for _, r := range o.Actor {
		if r < 0x20 || r == 0x7f {
			return &InvalidArgumentError{Field: "actor", Detail: "contains a control character"}
		}
	}
	switch o.Basis {
	case Authenticated, Asserted, Connected:
		return nil
	}
	return &InvalidArgumentError{Field: "basis", Detail: fmt.Sprintf("%q is not authenticated, asserted or connected", o.Basis)}
}

// Awaiting says what a suspended run waits for.
type Awaiting string

// What a suspension can wait for.
const (
	AwaitingEvent Awaiting = "event"
	AwaitingTime  Awaiting = "time"
)

// Suspension is what a RunSuspended record says the run waits for.
type Suspension struct {
	Awaiting Awaiting  `json:"awaiting"`
	Event    string    `json:"event,omitempty"` // the event kind, when awaiting an event
	Until    time.Time `json:"until"`           // when waiting ends; zero for an event with no deadline
}

// WaitingRun is a run whose last record is a suspension.
type WaitingRun struct {
	Run    RunID      `json:"run"`
	Reason Suspension `json:"reason"`
}

// Admission is what a RunAdmitted record says about where a run came from.
type Admission struct {
	Key    string // the admission (idempotency) key; empty: unkeyed
	Source string // the producer that admitted the run; empty: none
}

// SealingOutcomes are the conclusions nothing may resume: only these seal.
// A failed or exhausted run stays open for resume. The trial-* outcomes are
// the terminal states of a lifecycle trial run (package lifecycle): a
// terminal trial is never resumed (a retry is a new trial), so its run seals.
var SealingOutcomes = []string{"succeeded", "quarantined", "cancelled", "swept", "broke-glass", "trial-complete", "trial-pruned", "trial-failed"}

// IsSealingOutcome reports whether outcome is one of SealingOutcomes.
func IsSealingOutcome(outcome string) bool {
	for _, o := range SealingOutcomes {
		if o == outcome {
			return true
		}
	}
	return false
}

// ValidateOutcome refuses outcome strings that are not short lowercase tokens.
func ValidateOutcome(outcome string) error {
	if outcome == "" || len(outcome) > 64 {
		return &InvalidArgumentError{Field: "outcome", Detail: "must be 1 to 64 characters"}
	}
	for i := 0; i < len(outcome); i++ {
		c := outcome[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return &InvalidArgumentError{Field: "outcome", Detail: fmt.Sprintf("%q has a character outside [a-z0-9_-]", outcome)}
		}
	}
	return nil
}

// Facts are what the store reads from one record to maintain its derived
// indexes. Everything else in a record is opaque to the store.
type Facts struct {
	Admission  *Admission    // RunAdmitted
	Suspension *Suspension   // RunSuspended
	Outcome    string        // RunConcluded
	Cancelled  *Cancellation // RunCancelled
}

// ReadFacts validates the fields of the kinds the store reads and returns
// what its indexes need. A malformed field is an InvalidArgumentError naming
// it, so a bad record is refused before it is written.
func ReadFacts(b Body) (Facts, error) {
	switch b.Kind {
	case KindRunAdmitted, KindRunSuspended, KindRunConcluded, KindRunCancelled:
		v, err := canon.Parse(b.Fields)
		if err != nil {
			return Facts{}, &InvalidArgumentError{Field: "fields", Detail: err.Error()}
		}
		return readFacts(b, v)
	}
	return readFacts(b, canon.Value{})
}

// readFacts is ReadFacts over the kind's fields already parsed (v), for a
// caller that holds them: the append path, which would otherwise parse
// every record's fields once more.
func readFacts(b Body, v canon.Value) (Facts, error) {
	var f Facts
	var err error
	switch b.Kind {
	case KindEffectStarted:
		if b.EffectKey == nil {
			return f, &InvalidArgumentError{Field: "effect_key", Detail: "EffectStarted needs an effect key"}
		}
		return f, nil
	case KindRunAdmitted, KindRunSuspended, KindRunConcluded, KindRunCancelled:
	default:
		return f, nil
	}
	switch b.Kind {
	case KindRunAdmitted:
		a := &Admission{}
		if a.Key, err = optString(v, "admission_key", 512); err != nil {
			return f, err
		}
		if a.Source, err = optString(v, "source", 256); err != nil {
			return f, err
		}
		f.Admission = a
	case KindRunSuspended:
		s := &Suspension{}
		aw, err := optString(v, "awaiting", 16)
		if err != nil {
			return f, err
		}
		s.Awaiting = Awaiting(aw)
		if s.Event, err = optString(v, "event", 256); err != nil {
			return f, err
		}
		until, err := optString(v, "until", 64)
		if err != nil {
			return f, err
		}
		if _, present := v.Get("until"); present { // "" is not a timestamp, whatever awaiting says
			t, err := ParseTimestamp(until)
			if err != nil {
				return f, &InvalidArgumentError{Field: "fields.until", Detail: err.Error()}
			}
			s.Until = t.UTC()
		}
		switch s.Awaiting {
		case AwaitingTime:
			if s.Until.IsZero() {
				return f, &InvalidArgumentError{Field: "fields.until", Detail: "a suspension awaiting time needs until"}
			}
		case AwaitingEvent:
			if s.Event == "" {
				return f, &InvalidArgumentError{Field: "fields.event", Detail: "a suspension awaiting an event needs the event kind"}
			}
		default:
			return f, &InvalidArgumentError{Field: "fields.awaiting", Detail: fmt.Sprintf("%q is not \"event\" or \"time\"", aw)}
		}
		f.Suspension = s
	case KindRunConcluded:
		o, err := optString(v, "outcome", 64)
		if err != nil {
			return f, err
		}
		if err := ValidateOutcome(o); err != nil {
			return f, &InvalidArgumentError{Field: "fields.outcome", Detail: err.(*InvalidArgumentError).Detail}
		}
		f.Outcome = o
	case KindRunCancelled:
		c := &Cancellation{}
		av, ok := v.Get("actor")
		if !ok || av.Kind != canon.Object {
			return f, &InvalidArgumentError{Field: "fields.actor", Detail: "RunCancelled needs an actor object {actor, basis}"}
		}
		if c.Actor.Actor, err = optString(av, "actor", 256); err != nil {
			return f, err
		}
		basis, err := optString(av, "basis", 32)
		if err != nil {
			return f, err
		}
		c.Actor.Basis = Basis(basis)
		if err := c.Actor.Validate(); err != nil {
			return f, err
		}
		if c.Reason, err = optString(v, "reason", 4096); err != nil {
			return f, err
		}
		f.Cancelled = c
	}
	return f, nil
}

func optString(v canon.Value, key string, max int) (string, error) {
	m, ok := v.Get(key)
	if !ok {
		return "", nil
	}
	if m.Kind != canon.String {
		return "", &InvalidArgumentError{Field: "fields." + key, Detail: "must be a string"}
	}
	if len(m.Str) > max {
		return "", &InvalidArgumentError{Field: "fields." + key, Detail: fmt.Sprintf("longer than %d bytes", max)}
	}
	return m.Str, nil
}
