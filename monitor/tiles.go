package monitor

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/tiles"
)

// TileCacheSize bounds the tiles one TilesSource keeps: 8 KiB each, so at
// most 32 MiB; a 10^6-leaf log has about 8,000 tiles and bundles.
const TileCacheSize = 4096

// TilesSource is a Source over a C2SP tlog-tiles layout (spec/tiles.md):
// the checkpoint from checkpoint-witnessed (else checkpoint), consistency
// proofs built from tiles it authenticates against the served root. It is
// safe for concurrent use.
type TilesSource struct {
	loc   string
	f     tiles.Fetcher
	cache *tiles.Cache

	mu   sync.Mutex
	last []byte                // the note Witnessed returned last
	cp   checkpoint.Checkpoint // its checkpoint, parsed, unverified here
}

// NewTilesSource reads the layout through f; loc names it in results and
// evidence (credentials in it are redacted).
func NewTilesSource(loc string, f tiles.Fetcher) *TilesSource {
	return &TilesSource{loc: loc, f: f, cache: tiles.NewCache(TileCacheSize)}
}

// Base names the layout in results and evidence.
func (s *TilesSource) Base() string { return api.Redact(s.loc) }

// CheckpointAt fails with ErrNoOlderCheckpoint: a tlog-tiles layout
// publishes only its newest checkpoint. A failed proof from tiles needs no
// older note: it was built from tiles authenticated against the served
// root, so it reproduces that root, and log.ForkRoot shows the fork from
// the proof alone.
func (s *TilesSource) CheckpointAt(ctx context.Context, size uint64) ([]byte, error) {
	return nil, fmt.Errorf("%w, not the one at size %d", ErrNoOlderCheckpoint, size)
}

// Witnessed returns the newest witnessed checkpoint the layout publishes,
// or its newest checkpoint when it publishes no witnessed one (a plain
// tlog-tiles log); the caller's policy decides whether that suffices.
func (s *TilesSource) Witnessed(ctx context.Context) ([]byte, error) {
	b, err := tiles.LatestNote(ctx, s.f)
	if err != nil {
		return nil, err
	}
	cp, perr := parseNoteBody(b)
	s.mu.Lock()
	s.last, s.cp = nil, checkpoint.Checkpoint{}
	if perr == nil {
		s.last, s.cp = b, cp
	}
	s.mu.Unlock()
	return b, nil
}

// Consistency builds the proof from tiles of the tree of newSize, which
// must be the checkpoint this source served last (a Follower verifies it
// before asking; no other root is ever used), else an error wrapping
// ErrNotServed. A tile that is malformed or does not lead to that root is
// an error naming the tile (a *tiles.TileError): no verdict.
func (s *TilesSource) Consistency(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	s.mu.Lock()
	cp, ok := s.cp, s.last != nil && s.cp.Size == newSize
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: the tiles cannot prove size %d, so there is no signed root to authenticate them against", ErrNotServed, newSize)
	}
	hs, err := tiles.NewTree(newSize, cp.Root, s.f, s.cache).ConsistencyProof(ctx, oldSize)
	if err != nil {
		return nil, err
	}
	out := make([]store.Digest, len(hs))
	for i, h := range hs {
		out[i] = store.Digest(h)
	}
	return out, nil
}

// parseNoteBody parses the checkpoint of a note without checking any
// signature: only to remember a root to authenticate tiles against, which
// happens after the note itself was verified.
func parseNoteBody(n []byte) (checkpoint.Checkpoint, error) {
	i := bytes.Index(n, []byte("\n\n"))
	if i < 0 {
		return checkpoint.Checkpoint{}, fmt.Errorf("not a signed note")
	}
	return checkpoint.Parse(n[:i+1])
}
