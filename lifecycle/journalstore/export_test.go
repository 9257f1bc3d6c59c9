package journalstore

import (
	"context"
	"errors"

	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/store"
)

// ListingAt reads, straight from j's derived rows, the study run seq a
// study's summary row reflects; ok is false when the study has none.
func ListingAt(ctx context.Context, j Journal, study lifecycle.StudyID) (at store.Seq, ok bool, err error) {
	rs := findRows(j)
	if rs == nil {
		return 0, false, errors.New("the journal has no derived rows")
	}
	_, at, ok, err = readStudyRow(ctx, rs, study)
	return at, ok, err
}
