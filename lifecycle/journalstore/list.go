package journalstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/store"
)

// StudySummary is one study of a listing: what `journal study list`
// prints. It is read from the journal without writing, like [StudyView].
type StudySummary struct {
	Study lifecycle.StudyID `json:"study"`
	// Activity is the study run's place in the journal's activity order;
	// pass the last one as the cursor of the next page.
	Activity store.Activity `json:"activity"`
	Trials   int            `json:"trials"`
	// States counts the trials by state.
	States map[lifecycle.TrialState]int `json:"states,omitempty"`
	// Finalizer is the holder of the finalization claim, if held.
	Finalizer string `json:"finalizer,omitempty"`
	// OutboxOpen counts the outbox records not yet done.
	OutboxOpen int `json:"outbox_open"`
	// Pending counts the transitions whose commit point is in the journal
	// but not their completion (see StudyView.Pending).
	Pending int `json:"pending"`
	// Inconsistent is set, and the counts are zero, when the study's
	// records do not fold (spec/lifecycle.md 14.5): the listing goes on.
	Inconsistent *InconsistentError `json:"inconsistent,omitempty"`
}

// ListStudies reads one page of the journal's studies, the most recently
// active first, strictly after the cursor (nil: from the top), and
// summarizes each from a read-only fold. limit bounds the page as every
// journal listing does (1 to store.MaxLimit); a page costs one fold per
// study listed. A study whose records do not fold is listed with
// Inconsistent set rather than failing the page.
func ListStudies(ctx context.Context, j Journal, after *store.Activity, limit int) ([]StudySummary, error) {
	const op = "list_studies"
	if limit < 1 || limit > store.MaxLimit {
		return nil, lifecycle.NewError(lifecycle.KindResourceLimit, op, "limit %d is outside 1 to %d", limit, store.MaxLimit)
	}
	page, err := j.RecentRunsFrom(ctx, StudySource, after, limit)
	if err != nil {
		return nil, lifecycle.StorageError(op, err)
	}
	out := make([]StudySummary, 0, len(page))
	for _, a := range page {
		sum := StudySummary{Study: lifecycle.StudyID(a.Run.String()), Activity: a}
		v, err := ReadStudyView(ctx, j, sum.Study)
		var ie *InconsistentError
		switch {
		case errors.As(err, &ie):
			sum.Inconsistent = ie
			out = append(out, sum)
			continue
		case lifecycle.KindOf(err) == lifecycle.KindNotFound:
			// A run admitted as a study run that never opened as one is
			// not a study; Studies skips it the same way.
			continue
		case err != nil:
			return nil, err
		}
		sum.Trials, sum.Pending = len(v.Trials), len(v.Pending)
		sum.States = map[lifecycle.TrialState]int{}
		for _, t := range v.Trials {
			sum.States[t.State]++
		}
		if v.Finalization.Held {
			sum.Finalizer = v.Finalization.Holder
		}
		for _, o := range v.Outbox {
			if o.Phase != lifecycle.PhaseDone {
				sum.OutboxOpen++
			}
		}
		out = append(out, sum)
	}
	return out, nil
}

// WriteStudies prints a listing as a table, one study a line.
func WriteStudies(w io.Writer, studies []StudySummary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "STUDY\tTRIALS\tWAITING\tRUNNING\tPAUSED\tDONE\tFINALIZER\tOUTBOX OPEN\tPENDING\n")
	for _, s := range studies {
		if s.Inconsistent != nil {
			fmt.Fprintf(tw, "%s\tinconsistent: run %s seq %d: %s\n", s.Study, s.Inconsistent.Run, s.Inconsistent.Seq, s.Inconsistent.Detail)
			continue
		}
		done := s.States[lifecycle.TrialComplete] + s.States[lifecycle.TrialPruned] + s.States[lifecycle.TrialFailed]
		fin := s.Finalizer
		if fin == "" {
			fin = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", s.Study, s.Trials,
			s.States[lifecycle.TrialWaiting], s.States[lifecycle.TrialRunning], s.States[lifecycle.TrialPaused], done, fin, s.OutboxOpen, s.Pending)
	}
	return tw.Flush()
}
