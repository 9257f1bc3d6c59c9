package journalstore

import (
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/internal/model"
	"github.com/runseal/runseal/store"
)

// jview is what JournalStorage knows of one study: a fold of the study's
// records and nothing else. It is built by folding the study run and then
// each trial run, and kept current by folding exactly the records each
// operation appends, with the same functions; so the view after any
// operation equals the view a rebuild from the journal produces.
//
// Folding is strict. Each record must be a transition the lifecycle allows
// from the state the records before it built; anything else is a
// InconsistentError, and nothing is decided from a history that does not fold.
type jview struct {
	model.Study
	caseID store.CaseID
	run    store.RunID // the study run; its id is the case's ULID
	epoch  store.Epoch // the study run's lease epoch, fixed at creation
	head   store.Head  // the study run's head as folded
	byID   map[lifecycle.TrialID]*jtrial
	order  []*jtrial // by number
	// records are the outbox records, by key; memStudy.outbox orders them
	// by terminal sequence.
	records map[lifecycle.OutboxKey]*lifecycle.OutboxRecord
	// outboxOpen counts the records not done, for the summary row.
	outboxOpen int
	// foreign lists runs that carry the case but are neither the study run
	// nor one of its trials. They are not the study's, and are shown, not
	// folded.
	foreign []store.RunID
	// onTrial is told of every trial the study reserves.
	onTrial func(lifecycle.TrialID)
	// todo are the authorities folded since the last settle, and dirty the
	// trials with overlays to fold: the work a settle does next.
	todo  []*authority
	dirty []*jtrial
	// toSeal are the trials whose run concluded, until sealed.
	toSeal []*jtrial
}

// jtrial is one trial of a jview.
type jtrial struct {
	model.Trial
	run      store.RunID
	head     store.Head  // the trial run's head as folded
	runEpoch store.Epoch // the epoch of the trial run's last record
	// ended is set by the study run's TrialTerminal, the commit point of
	// the trial's end; the trial run's mirror of it follows.
	ended bool
	// endEpoch is the epoch of the trial run's TrialTerminal, the fence its
	// seal is made under; zero until that record is folded.
	endEpoch store.Epoch
	// concluded is set once the trial run's RunConcluded is folded.
	concluded bool
	sealed    bool
	// awaiting are the study run records whose mirror in this trial run is
	// not folded yet, oldest first.
	awaiting []*authority
	// voids are the ranges of this run's records an operator's repair
	// voided (fRecordsVoided), in order; the fold skips them.
	voids [][2]store.Seq
	// voidEpoch is the highest epoch of a voided record: above the owner's,
	// the voided writer fenced the owner out of the run (Repair).
	voidEpoch store.Epoch
	// overlays are trial-scope blobs the study run writes after the trial
	// ended (outbox state, finalized state), folded after the trial run.
	overlays []overlay
}

type overlay struct {
	rec  store.Record
	blob jBlob
}

// authority is a study run record that commits a transition of a trial
// run, and the exact records that mirror it there.
type authority struct {
	rec    store.Record
	mirror []store.Append
	// build makes mirror from a reference to rec; a rebase (the record
	// was folded before it was written, and the store wrote it with
	// another hash) makes it again.
	build mirrorFunc
	// epoch is the trial run epoch the mirror is appended under: the
	// owner's for an owner's transition, 1 for a new run, and 0 for a
	// transition by a non-owner, which takes a fresh lease first.
	epoch store.Epoch
	// released is the owner epoch whose lease the mirror's transition ends
	// (a pause or terminal of the owner, a stale failure); 0 for none.
	released store.Epoch
	// trial is the trial whose run the mirror goes to.
	trial *jtrial
	// done is set when the mirror is folded.
	done bool
}

func newView(c store.CaseID, onTrial func(lifecycle.TrialID)) *jview {
	id := lifecycle.StudyID(c.String())
	return &jview{
		Study: model.Study{
			ID:     id,
			Keys:   map[string]lifecycle.ReservationOutcome{},
			States: map[string]lifecycle.StateBlob{},
			Fin:    lifecycle.FinalizationObservation{Study: id},
		},
		caseID:  c,
		run:     store.RunID(c),
		byID:    map[lifecycle.TrialID]*jtrial{},
		records: map[lifecycle.OutboxKey]*lifecycle.OutboxRecord{},
		onTrial: onTrial,
	}
}

// studyRunID is the run of a study's own records: the case's ULID, so that
// the study run is found from the study id without a search.
func studyRunID(c store.CaseID) store.RunID { return store.RunID(c) }

// checkChain checks that r extends head in run: the view folds only a
// contiguous chain, so a record appended by anyone else shows up as a gap.
func checkChain(head store.Head, run store.RunID, r store.Record) error {
	if r.Run != run || r.Seq != head.Seq+1 || r.PrevHash != head.Hash {
		return corrupt(r, "does not extend the folded head (run %s seq %d): another writer appended to the study", run, head.Seq)
	}
	return nil
}
