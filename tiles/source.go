package tiles

import (
	"context"
	"errors"
	"fmt"

	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
)

// Source is what the tiles need from a tenant's log store, and nothing
// more, so that any backend (store/sqlite, store/postgres, a decorator)
// can serve them. The tiles never ask beyond the size of a signed
// checkpoint the Source itself returned.
type Source interface {
	// LatestCheckpoint returns the largest signed checkpoint, or nil.
	LatestCheckpoint(ctx context.Context) (*store.SignedCheckpoint, error)
	// LatestWitnessed returns the largest witnessed checkpoint (its note
	// carrying the cosignatures), or nil.
	LatestWitnessed(ctx context.Context) (*store.SignedCheckpoint, error)
	// LogLeaves returns the leaf values at indexes start to end-1, in
	// order, exactly end-start of them; a missing one is an error.
	LogLeaves(ctx context.Context, start, end uint64) ([]store.Digest, error)
	// LogNodes returns the stored hashes of the perfect subtrees at tree
	// level for indexes start to end-1 (level 0: leaf hashes), in order,
	// exactly end-start of them; a missing one is an error.
	LogNodes(ctx context.Context, level uint, start, end uint64) ([]store.Digest, error)
}

// Log produces one tenant's tlog-tiles resources from its store.
type Log struct {
	src Source
}

// NewLog returns the tiles of the log src keeps.
func NewLog(src Source) *Log { return &Log{src: src} }

// Checkpoint returns the newest signed checkpoint: its note as published,
// and its size. ErrNoCheckpoint when none was signed yet.
func (l *Log) Checkpoint(ctx context.Context) (*store.SignedCheckpoint, error) {
	sc, err := l.src.LatestCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("tiles: newest checkpoint: %w", err)
	}
	if sc == nil {
		return nil, ErrNoCheckpoint
	}
	return sc, nil
}

// Witnessed returns the newest witnessed checkpoint, or ErrNoCheckpoint.
func (l *Log) Witnessed(ctx context.Context) (*store.SignedCheckpoint, error) {
	sc, err := l.src.LatestWitnessed(ctx)
	if err != nil {
		return nil, fmt.Errorf("tiles: newest witnessed checkpoint: %w", err)
	}
	if sc == nil {
		return nil, ErrNoCheckpoint
	}
	return sc, nil
}

// Resource returns the bytes of tile or bundle r if a checkpoint of size
// implies it, else ErrNotFound (in a *TileError).
func (l *Log) Resource(ctx context.Context, r Ref, size uint64) ([]byte, error) {
	if !Implied(r, size) {
		return nil, tileErr(ErrNotFound, r.Path(), "not implied by the newest checkpoint (size %d)", size)
	}
	hs, err := l.Hashes(ctx, r)
	if err != nil {
		return nil, err
	}
	if r.Entries() {
		return MarshalEntryBundle(hs), nil
	}
	return MarshalHashTile(hs), nil
}

// Hashes returns the content of r as hashes: the entries of a bundle, or
// the hashes of a hash tile. It does not check that r is implied by a
// checkpoint; Resource does.
func (l *Log) Hashes(ctx context.Context, r Ref) ([]log.Hash, error) {
	start := r.Index * Width
	end := start + uint64(r.W)
	var ds []store.Digest
	var err error
	if r.Entries() {
		ds, err = l.src.LogLeaves(ctx, start, end)
	} else {
		ds, err = l.src.LogNodes(ctx, uint(8*r.Level), start, end)
	}
	if err != nil {
		return nil, fmt.Errorf("tiles: reading %s: %w", r.Path(), err)
	}
	if len(ds) != r.W {
		return nil, fmt.Errorf("tiles: reading %s: store returned %d hashes for %d: %w", r.Path(), len(ds), r.W, errShortRead)
	}
	out := make([]log.Hash, len(ds))
	for i, d := range ds {
		out[i] = log.Hash(d)
	}
	return out, nil
}

var errShortRead = errors.New("short read")
