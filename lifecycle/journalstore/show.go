package journalstore

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// StudyView is an operator's view of a study kept by JournalStorage: what
// `journal study show` prints. It is read from the journal's records, so
// an auditor with the journal sees the same.
type StudyView struct {
	Study lifecycle.StudyID `json:"study"`
	// StudyRun is the run holding the study's own records; its id is the
	// case's ULID.
	StudyRun string              `json:"study_run"`
	Spec     lifecycle.StudySpec `json:"spec"`
	// Trials are every trial record, by number.
	Trials []TrialView `json:"trials"`
	// Finalization is the study-wide finalization claim and its owner.
	Finalization lifecycle.FinalizationObservation `json:"finalization"`
	// Outbox are the study's outbox records, by terminal sequence.
	Outbox []OutboxView `json:"outbox"`
	// StudyStates names the study-scope (seam) state blobs.
	StudyStates []string `json:"study_states,omitempty"`
	// Pending describes transitions whose commit point is in the journal
	// but whose trial run records or seal are not: a crash interrupted
	// them, and JournalStorage completes them before the study's next
	// operation. A view read straight from the journal shows them as if
	// completed, and lists them here.
	Pending []string `json:"pending,omitempty"`
	// ForeignRuns are runs that carry the study's case but are not the
	// study's: they are shown, never folded.
	ForeignRuns []string `json:"foreign_runs,omitempty"`
}

// TrialView is one trial of a StudyView.
type TrialView struct {
	Trial        lifecycle.TrialID          `json:"trial"`
	Number       uint64                     `json:"number"`
	Managed      bool                       `json:"managed"`
	State        lifecycle.TrialState       `json:"state"`
	Owner        string                     `json:"owner,omitempty"`
	Epoch        uint64                     `json:"epoch"`
	HeartbeatSeq uint64                     `json:"heartbeat_seq"`
	HeartbeatAt  time.Time                  `json:"heartbeat_at,omitzero"`
	Sealed       bool                       `json:"sealed"`
	Outbox       *lifecycle.OutboxKey       `json:"outbox,omitempty"`
	ReplaceOf    *lifecycle.OutboxEffectKey `json:"replacement_of,omitempty"`
	// Voided are the ranges [from, to] of the trial run's records that an
	// operator's repair voided: they are in the journal, not in the study.
	Voided [][2]store.Seq `json:"voided,omitempty"`
}

// OutboxView is one outbox record of a StudyView: where its finalization
// stands and which effects are still pending.
type OutboxView struct {
	Key         lifecycle.OutboxKey   `json:"key"`
	TerminalSeq uint64                `json:"terminal_seq"`
	Outcome     lifecycle.TrialState  `json:"outcome"`
	Cause       lifecycle.OutboxCause `json:"cause"`
	Intent      string                `json:"intent"`
	Phase       lifecycle.OutboxPhase `json:"phase"`
	Effects     []string              `json:"effects,omitempty"`
	// PendingEffects are the published effects not completed yet.
	PendingEffects []string `json:"pending_effects,omitempty"`
}

// StudyView returns the operator's view of a study from this storage's
// current view of it (loading it, and completing interrupted transitions,
// if this is its first use).
func (s *Storage) StudyView(ctx context.Context, study lifecycle.StudyID) (StudyView, error) {
	const op = "study_view"
	if err := model.Begin(ctx, op); err != nil {
		return StudyView{}, err
	}
	st, err := s.openStudy(ctx, op, study)
	if err != nil {
		return StudyView{}, err
	}
	defer st.unlock()
	return st.v.studyView(nil), nil
}

// ReadStudyView reads the operator's view of a study straight from a
// journal, writing nothing: an interrupted transition is shown as the
// JournalStorage that next opens the study will complete it, and listed in
// Pending. It is what an operator or auditor uses beside (or instead of) a
// running JournalStorage; it may run while that process writes the study,
// and then shows a transition in flight as pending.
func ReadStudyView(ctx context.Context, j Journal, study lifecycle.StudyID) (StudyView, error) {
	const op = "read_study_view"
	if err := model.Begin(ctx, op); err != nil {
		return StudyView{}, err
	}
	c, err := store.ParseCaseID(string(study))
	if err != nil || c.IsZero() || c.String() != string(study) {
		return StudyView{}, lifecycle.NewError(lifecycle.KindNotFound, op, "study %q", study)
	}
	v, err := loadView(ctx, j, c, nil, true)
	if err != nil {
		if lifecycle.KindOf(err) != 0 {
			return StudyView{}, err
		}
		return StudyView{}, journalError(op, err)
	}
	pending, err := v.simulateSettle()
	if err != nil {
		return StudyView{}, journalError(op, err)
	}
	return v.studyView(pending), nil
}

// simulateSettle folds, without writing them, the records a settle would
// append, and describes each completion.
func (v *jview) simulateSettle() ([]string, error) {
	var out []string
	for len(v.todo) > 0 {
		a := v.todo[0]
		v.todo = v.todo[1:]
		if a.done {
			continue
		}
		t := a.trial
		epoch := a.epoch
		if epoch == 0 {
			epoch = t.runEpoch + 1 // a fresh lease
		}
		ps, err := store.BuildBatch(t.head, epoch, a.mirror)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if err := v.applyTrial(t, p.Record); err != nil {
				return nil, err
			}
		}
		out = append(out, fmt.Sprintf("study run seq %d (%s): trial %s owes its %s", a.rec.Seq, a.rec.Kind, t.ID, a.mirror[len(a.mirror)-1].Kind))
	}
	for _, t := range v.toSeal {
		out = append(out, fmt.Sprintf("trial %s: concluded as %s, not sealed", t.ID, outcomeOf(t.Lease.State)))
	}
	v.toSeal = nil
	for len(v.dirty) > 0 {
		t := v.dirty[0]
		v.dirty = v.dirty[1:]
		if err := t.flushOverlays(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (v *jview) studyView(pending []string) StudyView {
	out := StudyView{
		Study:        v.ID,
		StudyRun:     v.run.String(),
		Spec:         v.Spec,
		Trials:       []TrialView{},
		Finalization: v.Fin,
		Outbox:       []OutboxView{},
		Pending:      pending,
	}
	ended := map[lifecycle.TrialID]lifecycle.OutboxKey{}
	for _, key := range v.Outbox {
		rec := v.records[key]
		ov := OutboxView{
			Key: key, TerminalSeq: rec.TerminalSeq, Outcome: rec.Outcome, Cause: rec.Cause,
			Intent: rec.Intent.Kind, Phase: rec.Phase,
		}
		for _, e := range rec.Effects {
			ov.Effects = append(ov.Effects, e.Name)
			if model.Completion(rec, e.Name) == nil {
				ov.PendingEffects = append(ov.PendingEffects, e.Name)
			}
		}
		out.Outbox = append(out.Outbox, ov)
		ended[key.Trial] = key
	}
	for _, t := range v.order {
		tv := TrialView{
			Trial: t.ID, Number: t.Number, Managed: t.Managed, State: t.Lease.State, Owner: t.Lease.Owner,
			Epoch: t.Lease.Epoch, HeartbeatSeq: t.Lease.HeartbeatSeq, HeartbeatAt: t.Lease.HeartbeatAt, Sealed: t.sealed,
			Voided: t.voids,
		}
		if key, ok := ended[t.ID]; ok {
			tv.Outbox = &key
		}
		if t.ReplacementOf != nil {
			r := *t.ReplacementOf
			tv.ReplaceOf = &r
		}
		out.Trials = append(out.Trials, tv)
	}
	for name := range v.States {
		out.StudyStates = append(out.StudyStates, name)
	}
	slices.Sort(out.StudyStates)
	for _, r := range v.foreign {
		out.ForeignRuns = append(out.ForeignRuns, r.String())
	}
	return out
}

// WriteText writes the view for people: the study, its finalization owner,
// a table of trials (state, owner, epoch) and a table of outbox records
// (phase, pending effects).
func (sv StudyView) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("study %s (study run %s): %d objective(s), %d constraint(s), %d trial(s)\n",
		sv.Study, sv.StudyRun, sv.Spec.Objectives, sv.Spec.Constraints, len(sv.Trials))
	f := sv.Finalization
	switch {
	case f.Held:
		ew.printf("finalization: held by %q at fence %d, heartbeat %d\n", f.Holder, f.Fence, f.HeartbeatSeq)
	case f.Fence > 0:
		ew.printf("finalization: released at fence %d, heartbeat %d (protocol active)\n", f.Fence, f.HeartbeatSeq)
	default:
		ew.printf("finalization: never acquired\n")
	}
	if len(sv.StudyStates) > 0 {
		ew.printf("study state: %s\n", strings.Join(sv.StudyStates, ", "))
	}
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nNUMBER\tTRIAL\tSTATE\tOWNER\tEPOCH\tHEARTBEAT\tSEALED\n")
	for _, t := range sv.Trials {
		state := string(t.State)
		if !t.Managed {
			state += " (unmanaged)"
		}
		owner := t.Owner
		if owner == "" {
			owner = "-"
		}
		hb := fmt.Sprint(t.HeartbeatSeq)
		if !t.HeartbeatAt.IsZero() {
			hb += " at " + t.HeartbeatAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%t\n", t.Number, t.Trial, state, owner, t.Epoch, hb, t.Sealed)
	}
	tw.Flush()
	for _, t := range sv.Trials {
		for _, v := range t.Voided {
			ew.printf("trial %d: records %d to %d of its run are voided by a repair (not the study's)\n", t.Number, v[0], v[1])
		}
	}
	if len(sv.Outbox) > 0 {
		tw = tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "\nSEQ\tTRIAL\tEPOCH\tOUTCOME\tCAUSE\tINTENT\tPHASE\tPENDING EFFECTS\n")
		for _, o := range sv.Outbox {
			pending := "-"
			if len(o.PendingEffects) > 0 {
				pending = strings.Join(o.PendingEffects, ", ")
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", o.TerminalSeq, o.Key.Trial, o.Key.Epoch, o.Outcome, o.Cause, o.Intent, o.Phase, pending)
		}
		tw.Flush()
	}
	for _, p := range sv.Pending {
		ew.printf("pending: %s\n", p)
	}
	for _, r := range sv.ForeignRuns {
		ew.printf("foreign run in the case: %s\n", r)
	}
	return ew.err
}

// errWriter keeps the first write error, so that a long report checks
// once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
