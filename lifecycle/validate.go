package lifecycle

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/runseal/runseal/lifecycle/internal/jsontext"
)

// Limits every backend enforces, so that a request one backend accepts is
// accepted by all.
const (
	// MaxNameBytes bounds every name: owners, holders, keys, parameter,
	// attribute, blob, kind and effect names.
	MaxNameBytes = 256
	// MaxRequestBytes bounds a request's JSON encoding. It is half the
	// journal's 1 MiB record limit, so that any transition fits one
	// journal record with its envelope. Larger requests fail with
	// KindResourceLimit.
	MaxRequestBytes = 512 << 10
	// MaxObjectives bounds StudySpec.Objectives.
	MaxObjectives = 64
	// MaxConstraints bounds StudySpec.Constraints.
	MaxConstraints = 1024
)

func invalid(format string, args ...any) error {
	return &Error{Kind: KindInvalid, Detail: fmt.Sprintf(format, args...)}
}

func checkName(what, s string) error {
	switch {
	case s == "":
		return invalid("%s is empty", what)
	case len(s) > MaxNameBytes:
		return invalid("%s is %d bytes, over %d", what, len(s), MaxNameBytes)
	case !utf8.ValidString(s):
		// JSON would silently replace the bad bytes, and the name would not
		// survive a round trip through a journal record.
		return invalid("%s is not valid UTF-8", what)
	}
	return nil
}

func checkFinite(what string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		// JSON cannot carry it, so no journal record could.
		return invalid("%s is not finite", what)
	}
	return nil
}

func checkJSON(what string, raw json.RawMessage) error {
	if len(raw) > 0 && !json.Valid(raw) {
		return invalid("%s is not valid JSON", what)
	}
	return nil
}

// compactJSON returns raw without insignificant space, so that two
// encodings of one value compare equal. raw must be valid or empty.
func compactJSON(raw json.RawMessage) json.RawMessage { return jsontext.Compact(raw) }

// checkSize refuses a request whose JSON encoding exceeds MaxRequestBytes.
func checkSize(req any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return invalid("request cannot be encoded as JSON: %v", err)
	}
	if len(b) > MaxRequestBytes {
		return &Error{Kind: KindResourceLimit, Detail: fmt.Sprintf("request is %d bytes encoded, over %d", len(b), MaxRequestBytes)}
	}
	return nil
}

// Validate checks a study specification.
func (s StudySpec) Validate() error {
	if s.Objectives < 1 || s.Objectives > MaxObjectives {
		return invalid("objectives %d outside 1..%d", s.Objectives, MaxObjectives)
	}
	if s.Constraints < 0 || s.Constraints > MaxConstraints {
		return invalid("constraints %d outside 0..%d", s.Constraints, MaxConstraints)
	}
	return nil
}

// CheckValues checks a terminal outcome's state and objective values
// against the study: Complete needs exactly Objectives finite values,
// Pruned none or exactly that many, Failed none.
func (s StudySpec) CheckValues(state TrialState, values []float64) error {
	for i, v := range values {
		if err := checkFinite(fmt.Sprintf("value %d", i), v); err != nil {
			return err
		}
	}
	switch state {
	case TrialComplete:
		if len(values) != s.Objectives {
			return invalid("complete outcome has %d values, study has %d objectives", len(values), s.Objectives)
		}
	case TrialPruned:
		if len(values) != 0 && len(values) != s.Objectives {
			return invalid("pruned outcome has %d values, study has %d objectives", len(values), s.Objectives)
		}
	case TrialFailed:
		if len(values) != 0 {
			return invalid("failed outcome carries %d values", len(values))
		}
	default:
		return invalid("state %q is not terminal", state)
	}
	return nil
}

// CheckConstraints checks a canonical constraint blob against the study's
// constraint arity.
func (s StudySpec) CheckConstraints(b StateBlob) error {
	if s.Constraints == 0 {
		return invalid("study declares no constraints")
	}
	if b.Kind != ConstraintsKind || b.Version != ConstraintsVersion {
		return invalid("constraint state must be kind %q version %d", ConstraintsKind, ConstraintsVersion)
	}
	var vs []float64
	if err := json.Unmarshal(b.Data, &vs); err != nil {
		return invalid("constraint state is not a JSON array of numbers: %v", err)
	}
	if len(vs) != s.Constraints {
		return invalid("constraint state has %d values, study declares %d", len(vs), s.Constraints)
	}
	return nil
}

// IsConstraints reports whether b is in the canonical constraint scope.
func (b StateBlob) IsConstraints() bool {
	return b.Scope == ScopeTrial && b.Name == ConstraintsStateName
}

// Validate checks a blob's shape; where it may be written is the
// operation's business.
func (b StateBlob) Validate() error {
	if b.Scope != ScopeTrial && b.Scope != ScopeStudy {
		return invalid("state scope %q is neither %q nor %q", b.Scope, ScopeTrial, ScopeStudy)
	}
	if err := checkName("state name", b.Name); err != nil {
		return err
	}
	if err := checkName("state kind", b.Kind); err != nil {
		return err
	}
	if b.Version == 0 {
		return invalid("state %q has version 0; versions start at 1", b.Name)
	}
	return nil
}

// checkBlobs validates blobs and refuses two blobs for one scope and name.
// studyOK says whether the operation may write study-scope state.
func checkBlobs(blobs []StateBlob, studyOK bool) error {
	seen := make(map[ScopeLevel]map[string]bool, 2)
	for _, b := range blobs {
		if err := b.Validate(); err != nil {
			return err
		}
		if b.Scope == ScopeStudy && !studyOK {
			return invalid("state %q: this operation writes trial-scope state only", b.Name)
		}
		if seen[b.Scope] == nil {
			seen[b.Scope] = map[string]bool{}
		}
		if seen[b.Scope][b.Name] {
			return invalid("state %s/%q appears twice", b.Scope, b.Name)
		}
		seen[b.Scope][b.Name] = true
	}
	return nil
}

func checkParams(params []Param) error {
	seen := make(map[string]bool, len(params))
	for _, p := range params {
		if err := checkName("parameter name", p.Name); err != nil {
			return err
		}
		if err := checkFinite("parameter "+p.Name, p.Value); err != nil {
			return err
		}
		if err := checkJSON("distribution of "+p.Name, p.Distribution); err != nil {
			return err
		}
		if seen[p.Name] {
			return invalid("parameter %q appears twice", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

func (t TrialOwnerToken) validate() error {
	if t.Trial == "" {
		return invalid("token names no trial")
	}
	return checkName("owner", t.Owner)
}

// Validate checks the request's shape.
func (r ReserveAndCreateRequest) Validate() error {
	if r.Study == "" {
		return invalid("no study")
	}
	if r.MaxTrials == 0 {
		return invalid("max_trials is 0")
	}
	if r.Key != "" {
		return checkName("reservation key", r.Key)
	}
	return nil
}

// Validate checks the request's shape and size.
func (r ClaimRequest) Validate() error {
	if r.Trial == "" {
		return invalid("no trial")
	}
	if err := checkName("owner", r.Owner); err != nil {
		return err
	}
	if err := checkParams(r.Params); err != nil {
		return err
	}
	if err := checkBlobs(r.States, false); err != nil {
		return err
	}
	return checkSize(r)
}

// Validate checks the request's shape.
func (r RenewRequest) Validate() error { return r.Owner.validate() }

// Validate checks the request's shape and size.
func (r FailStaleRequest) Validate() error {
	if r.Observed.Trial == "" {
		return invalid("observation names no trial")
	}
	if r.Grace <= 0 {
		return invalid("grace %v is not positive", r.Grace)
	}
	if err := r.Intent.Validate(); err != nil {
		return err
	}
	return checkSize(r)
}

// Validate checks the request's shape and size.
func (r FencedMutationRequest) Validate() error {
	if err := r.Owner.validate(); err != nil {
		return err
	}
	if err := checkParams(r.Params); err != nil {
		return err
	}
	steps := make(map[uint64]bool, len(r.Intermediate))
	for _, iv := range r.Intermediate {
		if err := checkFinite(fmt.Sprintf("intermediate value at step %d", iv.Step), iv.Value); err != nil {
			return err
		}
		if steps[iv.Step] {
			return invalid("step %d appears twice", iv.Step)
		}
		steps[iv.Step] = true
	}
	for k, v := range r.Attrs {
		if err := checkName("attribute name", k); err != nil {
			return err
		}
		if len(v) == 0 {
			return invalid("attribute %q has no value", k)
		}
		if err := checkJSON("attribute "+k, v); err != nil {
			return err
		}
	}
	if err := checkBlobs(r.States, true); err != nil {
		return err
	}
	return checkSize(r)
}

// Validate checks the request's shape and size. The values are checked
// against the study by [StudySpec.CheckValues].
func (r TerminalRequest) Validate() error {
	if err := r.Owner.validate(); err != nil {
		return err
	}
	if !r.State.Terminal() {
		return invalid("state %q is not terminal", r.State)
	}
	if err := checkBlobs(r.States, true); err != nil {
		return err
	}
	return checkSize(r)
}

// Validate checks the intent's shape.
func (i FinalizationIntent) Validate() error {
	if err := checkName("intent kind", i.Kind); err != nil {
		return err
	}
	return checkJSON("intent data", i.Data)
}

// Validate checks the request's shape.
func (r FinalizationAcquireRequest) Validate() error {
	if r.Study == "" {
		return invalid("no study")
	}
	return checkName("holder", r.Holder)
}

// Validate checks the effect's shape.
func (e OutboxEffect) Validate() error {
	if err := checkName("effect name", e.Name); err != nil {
		return err
	}
	if err := checkJSON("payload of effect "+e.Name, e.Payload); err != nil {
		return err
	}
	switch e.Kind {
	case EffectExternal:
		if e.Replacement != nil {
			return invalid("external effect %q carries a replacement", e.Name)
		}
	case EffectReplacement:
		if e.Replacement == nil {
			return invalid("replacement effect %q has no replacement spec", e.Name)
		}
		return e.Replacement.Validate()
	default:
		return invalid("effect %q has unknown kind %q", e.Name, e.Kind)
	}
	return nil
}

// Validate checks the spec's shape.
func (s ReplacementSpec) Validate() error {
	if s.MaxTrials == 0 {
		return invalid("replacement max_trials is 0")
	}
	if err := checkParams(s.Params); err != nil {
		return err
	}
	if err := checkBlobs(s.States, false); err != nil {
		return err
	}
	for _, b := range s.States {
		if b.IsConstraints() {
			return &Error{Kind: KindConflict, Detail: "constraint state is written only under the trial owner's fence"}
		}
	}
	return nil
}

// Validate checks the request's shape and size.
func (r OutboxAdvanceRequest) Validate() error {
	if r.Key.Trial == "" {
		return invalid("outbox key names no trial")
	}
	if r.Phase.Rank() == 0 {
		return invalid("unknown outbox phase %q", r.Phase)
	}
	if len(r.Effects) > 0 && r.Phase != PhaseEffects {
		return invalid("effects are published only when advancing to %q", PhaseEffects)
	}
	if err := checkBlobs(r.States, true); err != nil {
		return err
	}
	for _, b := range r.States {
		if b.IsConstraints() {
			return &Error{Kind: KindConflict, Detail: "constraint state is written only under the trial owner's fence"}
		}
	}
	names := make(map[string]bool, len(r.Effects))
	for _, e := range r.Effects {
		if err := e.Validate(); err != nil {
			return err
		}
		if names[e.Name] {
			return invalid("effect %q appears twice", e.Name)
		}
		names[e.Name] = true
	}
	return checkSize(r)
}

// Validate checks the request's shape and size. A study-scope blob or the
// canonical constraint scope is a conflict, as the contract says: this
// operation writes the terminal trial's own scope only.
func (r FinalizedStateRequest) Validate() error {
	if r.Trial == "" {
		return invalid("no trial")
	}
	if err := r.State.Validate(); err != nil {
		return err
	}
	if r.State.Scope != ScopeTrial {
		return &Error{Kind: KindConflict, Detail: "finalized state must be in the trial's own scope"}
	}
	if r.State.IsConstraints() {
		return &Error{Kind: KindConflict, Detail: "constraint state is written only under the trial owner's fence"}
	}
	return checkSize(r)
}

// Validate refuses zero limits and limits no int can hold, as
// KindResourceLimit, and a request with no study.
func (r OutboxPageRequest) Validate() error {
	for _, l := range []struct {
		name string
		v    uint64
	}{{"max_records", r.MaxRecords}, {"max_bytes", r.MaxBytes}} {
		if l.v == 0 {
			return &Error{Kind: KindResourceLimit, Detail: l.name + " is 0"}
		}
		if l.v > math.MaxInt {
			return &Error{Kind: KindResourceLimit, Detail: fmt.Sprintf("%s %d is not representable", l.name, l.v)}
		}
	}
	if r.Study == "" {
		return invalid("no study")
	}
	return nil
}

// RecordSize is the size a record counts against OutboxPageRequest.MaxBytes:
// the length of its encoding/json encoding. Every backend uses it, so that
// one request yields the same page everywhere.
func RecordSize(r OutboxRecord) (int, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	return len(b), nil
}
