package journalstore_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/lifecycle"
)

// BenchmarkListOutboxPage measures one page of 10 outbox records from the
// middle of a study of n records, in a storage that has not loaded the
// study (read from the derived rows), beside loading the study's view in
// a fresh storage: what the first page cost before derived rows, and what
// any operation on the study still costs once per process. The page's
// cost does not grow with n; the load's does.
//
//	go test ./lifecycle/journalstore -run '^$' -bench ListOutboxPage -benchtime 20x
func BenchmarkListOutboxPage(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{50, 400} {
		st := openJournal(b, filepath.Join(b.TempDir(), "journal.db"))
		s := newJournalStorage(b, st)
		study, err := s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1})
		must(b, err)
		for range n {
			terminalWithIntent(b, ctx, s, study)
		}
		must(b, s.Close())
		first, err := func() (lifecycle.OutboxPage, error) {
			s := newJournalStorage(b, st)
			defer s.Close()
			return s.ListOutboxPage(ctx, lifecycle.OutboxPageRequest{Study: study, MaxRecords: uint64(n / 2), MaxBytes: math.MaxInt})
		}()
		must(b, err)
		req := lifecycle.OutboxPageRequest{Study: study, MaxRecords: 10, MaxBytes: math.MaxInt, Cursor: first.Next}
		b.Run(fmt.Sprintf("records=%d/page", n), func(b *testing.B) {
			s := newJournalStorage(b, st)
			defer s.Close()
			for b.Loop() {
				p, err := s.ListOutboxPage(ctx, req)
				if err != nil || len(p.Records) != 10 {
					b.Fatalf("page: %d records, %v", len(p.Records), err)
				}
			}
		})
		b.Run(fmt.Sprintf("records=%d/load-view", n), func(b *testing.B) {
			for b.Loop() {
				s := newJournalStorage(b, st)
				if _, err := s.InspectStudy(ctx, study); err != nil {
					b.Fatal(err)
				}
				must(b, s.Close())
			}
		})
		st.Close()
	}
}
