package journalstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
)

// BenchmarkListStudies measures one page of ListStudies (journal study
// list) over 4 studies of n completed trials each: the page folds every
// study it lists, so its cost grows with the studies' histories, not with
// the page.
//
//	go test ./lifecycle/journalstore -run '^$' -bench ListStudies -benchtime 10x
func BenchmarkListStudies(b *testing.B) {
	ctx := context.Background()
	const studies = 4
	for _, n := range []int{10, 80} {
		st := openJournal(b, filepath.Join(b.TempDir(), "journal.db"))
		s := newJournalStorage(b, st)
		for range studies {
			study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
			must(b, err)
			for range n {
				terminalWithIntent(b, ctx, s, study)
			}
		}
		must(b, s.Close())
		b.Run(fmt.Sprintf("trials=%d", n), func(b *testing.B) {
			for b.Loop() {
				page, err := journalstore.ListStudies(ctx, st, nil, studies)
				if err != nil || len(page) != studies || page[0].Trials != n {
					b.Fatalf("page of %d studies (%v)", len(page), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/studies, "µs/study")
		})
		st.Close()
	}
}
