package journalstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// The record kinds JournalStorage writes. spec/lifecycle.md section 14.4
// lists their fields. A kind written in the study run is the commit point
// of its transition; the same kind in a trial run, carrying "authority", is
// the trial's mirror of it, a pure function of the study run's record.
const (
	RecordStudyOpened          = "StudyOpened"
	RecordTrialReserved        = "TrialReserved"
	RecordTrialCreated         = "TrialCreated"
	RecordTrialClaimed         = "TrialClaimed"
	RecordTrialHeartbeat       = "TrialHeartbeat"
	RecordTrialMutated         = "TrialMutated"
	RecordTrialTerminal        = "TrialTerminal"
	RecordFinalizationAcquired = "FinalizationAcquired"
	RecordFinalizationRenewed  = "FinalizationRenewed"
	RecordFinalizationReleased = "FinalizationReleased"
	RecordOutboxAdvanced       = "OutboxAdvanced"
	RecordEffectCompleted      = "EffectCompleted"
	RecordReplacementCreated   = "ReplacementCreated"
	RecordFinalizedStatePut    = "FinalizedStatePut"
	// RecordTrialRecordsVoided is an operator's repair (Storage.Repair):
	// records of a trial run that are not the study's, skipped by the fold.
	RecordTrialRecordsVoided = "TrialRecordsVoided"
)

// Sources of the RunAdmitted record that opens each run JournalStorage
// writes, so that the journal's source index lists studies and trials.
const (
	StudySource = "runseal.lifecycle.study"
	TrialSource = "runseal.lifecycle.trial"
)

// journalOwner owns the leases JournalStorage takes for itself: the study
// run's, and a trial run's when a non-owner ends it (abandon, stale
// failure).
const journalOwner = "runseal.lifecycle"

// journalFormat is the version of the record fields below.
const journalFormat = 1

// endCause says which transition ended a trial. It extends OutboxCause with
// abandonment, which creates no outbox record.
type endCause string

const (
	endTerminal  endCause = "terminal"
	endStale     endCause = "stale"
	endAbandoned endCause = "abandoned"
)

type jParam struct {
	Name         string  `json:"name"`
	Value        float64 `json:"value"`
	Distribution string  `json:"distribution,omitempty"`
}

type jBlob struct {
	Scope   lifecycle.ScopeLevel `json:"scope"`
	Name    string               `json:"name"`
	Kind    string               `json:"kind"`
	Version uint32               `json:"version"`
	Data    []byte               `json:"data,omitempty"`
}

type jStep struct {
	Step  uint64  `json:"step"`
	Value float64 `json:"value"`
}

type jIntent struct {
	Kind string `json:"kind"`
	Data string `json:"data,omitempty"`
}

type jSpec struct {
	MaxTrials uint64   `json:"max_trials"`
	Params    []jParam `json:"params,omitempty"`
	States    []jBlob  `json:"states,omitempty"`
}

type jEffect struct {
	Name        string               `json:"name"`
	Kind        lifecycle.EffectKind `json:"kind"`
	Payload     string               `json:"payload,omitempty"`
	Replacement *jSpec               `json:"replacement,omitempty"`
}

// jRef names the study run record a trial run record mirrors.
type jRef struct {
	Seq  store.Seq    `json:"seq"`
	Hash store.Digest `json:"hash"`
}

// jEffectKey names an outbox effect; the outbox key's epoch is the owner
// epoch, spelled owner_epoch because "epoch" is a routing field.
type jEffectKey struct {
	Trial      lifecycle.TrialID `json:"trial"`
	OwnerEpoch uint64            `json:"owner_epoch"`
	Name       string            `json:"name"`
}

type fRunAdmitted struct {
	Source string `json:"source"`
}

type fRunConcluded struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

type fStudyOpened struct {
	Format int                 `json:"format"`
	Spec   lifecycle.StudySpec `json:"spec"`
}

type fTrialReserved struct {
	Trial   lifecycle.TrialID    `json:"trial"`
	Number  uint64               `json:"number"`
	Key     string               `json:"key,omitempty"`
	Managed bool                 `json:"managed"`
	State   lifecycle.TrialState `json:"state,omitempty"` // unmanaged trials only
}

type fTrialCreated struct {
	Authority     jRef                 `json:"authority"`
	Number        uint64               `json:"number"`
	Managed       bool                 `json:"managed"`
	State         lifecycle.TrialState `json:"state,omitempty"`
	Params        []jParam             `json:"params,omitempty"`
	States        []jBlob              `json:"states,omitempty"`
	ReplacementOf *jEffectKey          `json:"replacement_of,omitempty"`
}

type fTrialClaimed struct {
	Owner       string   `json:"owner"`
	HeartbeatAt string   `json:"heartbeat_at,omitempty"`
	Params      []jParam `json:"params,omitempty"`
	States      []jBlob  `json:"states,omitempty"`
}

// fRecordsVoided voids the trial run's records from_seq..to_seq: they are
// not the study's (a second writer's), and the fold skips them.
type fRecordsVoided struct {
	Trial  lifecycle.TrialID `json:"trial"`
	From   uint64            `json:"from_seq"`
	To     uint64            `json:"to_seq"`
	Reason string            `json:"reason"`
}

type fTrialHeartbeat struct {
	HeartbeatSeq uint64 `json:"heartbeat_seq"`
	HeartbeatAt  string `json:"heartbeat_at,omitempty"`
}

// jMutation is the trial part of a mutation: only what it changes
// (parameters and steps not set before), so that folding it is strict.
type jMutation struct {
	Params       []jParam          `json:"params,omitempty"`
	Intermediate []jStep           `json:"intermediate,omitempty"`
	Attrs        map[string]string `json:"attrs,omitempty"`
	States       []jBlob           `json:"states,omitempty"` // trial scope
	Pause        bool              `json:"pause,omitempty"`
}

// fTrialMutated is TrialMutated in a trial run.
type fTrialMutated struct {
	jMutation
	FinalizerFence uint64 `json:"finalizer_fence,omitempty"`
	Authority      *jRef  `json:"authority,omitempty"`
}

// fStudyMutated is TrialMutated in the study run: written only when the
// mutation replaces study-scope state, which makes it a two-run transition.
type fStudyMutated struct {
	Trial      lifecycle.TrialID `json:"trial"`
	OwnerEpoch uint64            `json:"owner_epoch"`
	jMutation
	StudyStates    []jBlob `json:"study_states"`
	FinalizerFence uint64  `json:"finalizer_fence,omitempty"`
}

// fStudyTerminal is TrialTerminal in the study run: the commit point of
// every terminal transition, and of the outbox record when Intent is set.
type fStudyTerminal struct {
	Trial          lifecycle.TrialID    `json:"trial"`
	OwnerEpoch     uint64               `json:"owner_epoch"`
	State          lifecycle.TrialState `json:"state"`
	Cause          endCause             `json:"cause"`
	Values         []float64            `json:"values,omitempty"`
	States         []jBlob              `json:"states,omitempty"` // trial scope
	StudyStates    []jBlob              `json:"study_states,omitempty"`
	Intent         *jIntent             `json:"intent,omitempty"`
	GraceNS        int64                `json:"grace_ns,omitempty"`
	TerminalSeq    uint64               `json:"terminal_seq,omitempty"`
	FinalizerFence uint64               `json:"finalizer_fence,omitempty"`
}

// fTrialTerminal is TrialTerminal in a trial run, followed by RunConcluded.
type fTrialTerminal struct {
	Authority  jRef                 `json:"authority"`
	OwnerEpoch uint64               `json:"owner_epoch"`
	State      lifecycle.TrialState `json:"state"`
	Cause      endCause             `json:"cause"`
	Values     []float64            `json:"values,omitempty"`
	States     []jBlob              `json:"states,omitempty"`
}

type fFinalizationAcquired struct {
	Holder string `json:"holder"`
	Fence  uint64 `json:"fence"`
}

type fFinalizationRenewed struct {
	Fence        uint64 `json:"fence"`
	HeartbeatSeq uint64 `json:"heartbeat_seq"`
}

type fFinalizationReleased struct {
	Fence uint64 `json:"fence"`
}

type fOutboxAdvanced struct {
	Trial          lifecycle.TrialID     `json:"trial"`
	OwnerEpoch     uint64                `json:"owner_epoch"`
	Phase          lifecycle.OutboxPhase `json:"outbox_phase"`     // "phase" is a routing field
	States         []jBlob               `json:"states,omitempty"` // both scopes
	Effects        []jEffect             `json:"effects,omitempty"`
	FinalizerFence uint64                `json:"finalizer_fence,omitempty"`
}

type fEffectCompleted struct {
	Trial      lifecycle.TrialID `json:"trial"`
	OwnerEpoch uint64            `json:"owner_epoch"`
	Name       string            `json:"name"`
}

// fReplacementCreated completes a replacement effect; when Status is
// created it also reserves the new trial, and repeats the spec's params
// and states so that the new trial's TrialCreated is a function of it.
type fReplacementCreated struct {
	Trial      lifecycle.TrialID           `json:"trial"`
	OwnerEpoch uint64                      `json:"owner_epoch"`
	Name       string                      `json:"name"`
	Status     lifecycle.ReplacementStatus `json:"status"`
	NewTrial   lifecycle.TrialID           `json:"new_trial,omitempty"`
	Number     uint64                      `json:"number,omitempty"`
	Params     []jParam                    `json:"params,omitempty"`
	States     []jBlob                     `json:"states,omitempty"`
}

type fFinalizedStatePut struct {
	Trial lifecycle.TrialID `json:"trial"`
	State jBlob             `json:"state"`
}

// encodeFields marshals a kind's fields. Every value here is plain data,
// so an error is a programming error, reported rather than panicked on.
func encodeFields(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode record fields: %w", err)
	}
	return b, nil
}

// decodeFields reads a record's fields strictly: an unknown field means a
// record this format does not describe, which is corruption, not news.
func decodeFields(r store.Record, into any) error {
	d := json.NewDecoder(bytes.NewReader(r.Fields))
	d.DisallowUnknownFields()
	if err := d.Decode(into); err != nil {
		return corrupt(r, "fields of %s: %v", r.Kind, err)
	}
	return nil
}

// ErrInconsistent is the class of [*InconsistentError]: the journal's
// lifecycle records of a study do not fold (spec/lifecycle.md section
// 14.5). Operations on such a study fail with lifecycle.KindStorage
// wrapping it, so errors.Is(err, ErrInconsistent) tells it from an
// ordinary I/O failure: retrying cannot help, an operator must look.
var ErrInconsistent = errors.New("lifecycle records in the journal do not fold")

// InconsistentError reports journal content that contradicts the record
// format or the lifecycle's invariants, at the first record that does not
// fold. It unwraps to [ErrInconsistent]. Nothing is decided from a history
// that does not fold.
type InconsistentError struct {
	// Run and Seq locate the first record that does not fold; Seq is 0
	// when the fault is in the journal's indexes rather than a record.
	Run    store.RunID `json:"run"`
	Seq    store.Seq   `json:"seq"`
	Detail string      `json:"detail"`
}

func (e *InconsistentError) Error() string {
	return fmt.Sprintf("lifecycle records in the journal do not fold: run %s seq %d: %s", e.Run, e.Seq, e.Detail)
}

// Unwrap returns ErrInconsistent.
func (e *InconsistentError) Unwrap() error { return ErrInconsistent }

func corrupt(r store.Record, format string, args ...any) error {
	return &InconsistentError{Run: r.Run, Seq: r.Seq, Detail: fmt.Sprintf(format, args...)}
}

// checkUTF8JSON refuses user JSON that is not valid UTF-8: a journal record
// carries UTF-8 only, and JSON encoding would silently replace the bad
// bytes, so the value would not be kept verbatim.
func checkUTF8JSON(what string, raw json.RawMessage) error {
	if !utf8.Valid(raw) {
		return model.Invalid("%s is not valid UTF-8; a journal record cannot carry it verbatim", what)
	}
	return nil
}

func toJParam(p lifecycle.Param) jParam {
	return jParam{Name: p.Name, Value: p.Value, Distribution: string(model.CompactJSON(p.Distribution))}
}

func fromJParam(p jParam) lifecycle.Param {
	out := lifecycle.Param{Name: p.Name, Value: p.Value}
	if p.Distribution != "" {
		out.Distribution = json.RawMessage(p.Distribution)
	}
	return out
}

func toJParams(ps []lifecycle.Param) []jParam {
	var out []jParam
	for _, p := range ps {
		out = append(out, toJParam(p))
	}
	return out
}

func fromJParams(ps []jParam) []lifecycle.Param {
	var out []lifecycle.Param
	for _, p := range ps {
		out = append(out, fromJParam(p))
	}
	return out
}

func toJBlob(b lifecycle.StateBlob) jBlob {
	out := jBlob{Scope: b.Scope, Name: b.Name, Kind: b.Kind, Version: b.Version}
	if len(b.Data) > 0 {
		out.Data = append([]byte(nil), b.Data...)
	}
	return out
}

func fromJBlob(b jBlob) lifecycle.StateBlob {
	out := lifecycle.StateBlob{Scope: b.Scope, Name: b.Name, Kind: b.Kind, Version: b.Version}
	if len(b.Data) > 0 {
		out.Data = append([]byte(nil), b.Data...)
	}
	return out
}

// toJBlobs converts the blobs of one scope.
func toJBlobs(bs []lifecycle.StateBlob, scope lifecycle.ScopeLevel) []jBlob {
	var out []jBlob
	for _, b := range bs {
		if b.Scope == scope {
			out = append(out, toJBlob(b))
		}
	}
	return out
}

func fromJBlobs(bs []jBlob) []lifecycle.StateBlob {
	var out []lifecycle.StateBlob
	for _, b := range bs {
		out = append(out, fromJBlob(b))
	}
	return out
}

func toJEffect(e lifecycle.OutboxEffect) jEffect {
	out := jEffect{Name: e.Name, Kind: e.Kind, Payload: string(model.CompactJSON(e.Payload))}
	if e.Replacement != nil {
		out.Replacement = &jSpec{
			MaxTrials: e.Replacement.MaxTrials,
			Params:    toJParams(e.Replacement.Params),
			States:    toJBlobs(e.Replacement.States, lifecycle.ScopeTrial),
		}
	}
	return out
}

func fromJEffect(e jEffect) lifecycle.OutboxEffect {
	out := lifecycle.OutboxEffect{Name: e.Name, Kind: e.Kind}
	if e.Payload != "" {
		out.Payload = json.RawMessage(e.Payload)
	}
	if e.Replacement != nil {
		out.Replacement = &lifecycle.ReplacementSpec{
			MaxTrials: e.Replacement.MaxTrials,
			Params:    fromJParams(e.Replacement.Params),
			States:    fromJBlobs(e.Replacement.States),
		}
	}
	return out
}

func toJIntent(i lifecycle.FinalizationIntent) *jIntent {
	return &jIntent{Kind: i.Kind, Data: string(model.CompactJSON(i.Data))}
}

func fromJIntent(i jIntent) lifecycle.FinalizationIntent {
	out := lifecycle.FinalizationIntent{Kind: i.Kind}
	if i.Data != "" {
		out.Data = json.RawMessage(i.Data)
	}
	return out
}

// formatTime writes an owner's heartbeat time as RFC 3339 in UTC: the
// instant is what the contract compares, and one spelling per instant keeps
// records canonical. The zero time is omitted.
func formatTime(t time.Time) (string, error) {
	if t.IsZero() {
		return "", nil
	}
	u := t.UTC()
	if y := u.Year(); y < 0 || y > 9999 {
		return "", model.Invalid("heartbeat time %v is outside years 0000-9999; a record cannot carry it", t)
	}
	return u.Format(time.RFC3339Nano), nil
}

func parseTime(r store.Record, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, corrupt(r, "heartbeat_at %q: %v", s, err)
	}
	return t.UTC(), nil
}

// outcomeOf is the journal outcome that concludes and seals a trial run.
func outcomeOf(s lifecycle.TrialState) string { return "trial-" + string(s) }
