package sealed

import (
	"context"

	"github.com/runseal/runseal/store"
)

// Bulk is a sealing Journal over a store that reads runs in bulk: it is a
// store.BulkReader whose pages are the inner store's, bytes as stored.
// Sealed fields stay sealed in them (an export never opens an envelope and
// needs no key), so a sealed journal exports at its store's bulk speed
// instead of run by run.
type Bulk struct {
	*Journal
	scan store.BulkReader
}

var _ store.BulkReader = (*Bulk)(nil)

// WithBulk returns j with the bulk reads of the store it wraps, if that
// store is a store.BulkReader. A Journal alone does not claim the
// interface, so a caller's type check never finds it over a store without
// it.
func (j *Journal) WithBulk() (*Bulk, bool) {
	br, ok := j.Journal.(store.BulkReader)
	if !ok {
		return nil, false
	}
	return &Bulk{Journal: j, scan: br}, true
}

// ScanRuns pages through the inner store's records and run rows as
// stored (store.BulkReader).
func (b *Bulk) ScanRuns(ctx context.Context, page *store.RunsPage, after store.RunCursor, limit, maxBytes int) error {
	return b.scan.ScanRuns(ctx, page, after, limit, maxBytes)
}
