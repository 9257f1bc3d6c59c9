package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/tiles"
)

// tileCacheSize bounds the tiles one auditor process keeps: 8 KiB each,
// so at most 32 MiB; a 10^6-leaf log has about 8,000 tiles and bundles.
const tileCacheSize = 4096

// logSource is where the monitor reads a log: the journal's HTTP API
// (api.Client) or a C2SP tlog-tiles layout (tilesSource).
type logSource interface {
	Witnessed(ctx context.Context) ([]byte, error)
	Consistency(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error)
	// CheckpointAt returns the note the log signed at size, which tells a
	// fork from a server's bad proof.
	CheckpointAt(ctx context.Context, size uint64) ([]byte, error)
	Base() string
}

var _ logSource = (*api.Client)(nil)

// openTiles opens --tiles LOC: an http(s) URL of a layout's prefix, or a
// local directory as 'journal tiles sync' writes it.
func openTiles(loc string, timeout time.Duration) (tiles.Fetcher, error) {
	if strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://") {
		f, err := tiles.NewHTTPFetcher(loc, &http.Client{Timeout: timeout})
		if err != nil {
			return nil, usageErrorf("--tiles: %v", err)
		}
		return f, nil
	}
	return tiles.DirFetcher{Dir: loc}, nil
}

// tilesSource is the monitor's logSource over a tlog-tiles layout: the
// checkpoint from checkpoint-witnessed (else checkpoint), consistency
// proofs built from tiles it authenticates against the served root.
type tilesSource struct {
	loc   string
	f     tiles.Fetcher
	cache *tiles.Cache

	mu   sync.Mutex
	last []byte                // the note Witnessed returned last
	cp   checkpoint.Checkpoint // its checkpoint, parsed, unverified here
}

func newTilesSource(loc string, timeout time.Duration) (*tilesSource, error) {
	f, err := openTiles(loc, timeout)
	if err != nil {
		return nil, err
	}
	return &tilesSource{loc: loc, f: f, cache: tiles.NewCache(tileCacheSize)}, nil
}

// Base names the layout in results and evidence.
func (s *tilesSource) Base() string { return api.Redact(s.loc) }

// CheckpointAt fails: a tlog-tiles layout publishes only its newest
// checkpoint. A failed proof from tiles needs no older note: it was built
// from tiles authenticated against the served root, so it reproduces that
// root, and log.ForkRoot shows the fork from the proof alone.
func (s *tilesSource) CheckpointAt(ctx context.Context, size uint64) ([]byte, error) {
	return nil, fmt.Errorf("a tiles layout publishes only its newest checkpoint, not the one at size %d", size)
}

// Witnessed returns the newest witnessed checkpoint the layout publishes,
// or its newest checkpoint when it publishes no witnessed one (a plain
// tlog-tiles log); the caller's policy decides whether that suffices.
func (s *tilesSource) Witnessed(ctx context.Context) ([]byte, error) {
	b, err := s.f.Fetch(ctx, tiles.WitnessedPath)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = s.f.Fetch(ctx, tiles.CheckpointPath)
	}
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
// must be the checkpoint this source served last (the monitor verifies it
// before asking; no other root is ever used). A tile that is malformed or
// does not lead to that root is an error naming the tile: no verdict.
func (s *tilesSource) Consistency(ctx context.Context, oldSize, newSize uint64) ([]store.Digest, error) {
	s.mu.Lock()
	cp, ok := s.cp, s.last != nil && s.cp.Size == newSize
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("the tiles cannot prove size %d: it is not the checkpoint the layout serves, so there is no signed root to authenticate them against", newSize)
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
	i := strings.Index(string(n), "\n\n")
	if i < 0 {
		return checkpoint.Checkpoint{}, fmt.Errorf("not a signed note")
	}
	return checkpoint.Parse(n[:i+1])
}

// fetchTilesNote reads the checkpoint to verify against when none was
// given: the layout's witnessed checkpoint, else its checkpoint.
func fetchTilesNote(ctx context.Context, f tiles.Fetcher) ([]byte, error) {
	b, err := f.Fetch(ctx, tiles.WitnessedPath)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = f.Fetch(ctx, tiles.CheckpointPath)
	}
	return b, err
}

// tilesProofError files a failure to build a proof from tiles: a bad or
// missing tile leaves the question open (exit 3), naming the tile.
func tilesProofError(o *proofOutput, err error) {
	var te *tiles.TileError
	if errors.As(err, &te) {
		o.Unverifiable = append(o.Unverifiable, fmt.Sprintf("the tiles do not give a proof: %s is wrong: %v", te.Path, err))
		return
	}
	o.Unverifiable = append(o.Unverifiable, fmt.Sprintf("the tiles do not give a proof: %v", err))
}

// tilesTimeout bounds each tile fetch of inclusion and consistency.
const tilesTimeout = 60 * time.Second

// tilesConsistency builds the consistency proof from oldSize to the
// checkpoint (size, root) from tiles authenticated against root.
func tilesConsistency(ctx context.Context, f tiles.Fetcher, oldSize uint64, cp checkpoint.Checkpoint) ([]log.Hash, error) {
	if oldSize > cp.Size {
		return nil, fmt.Errorf("the old checkpoint (size %d) is larger than the new one (size %d)", oldSize, cp.Size)
	}
	return tiles.NewTree(cp.Size, cp.Root, f, nil).ConsistencyProof(ctx, oldSize)
}

// tilesInclusion builds the inclusion proof of index in the checkpoint
// (size, root) from tiles authenticated against root, and returns the
// entry the layout holds at index too.
func tilesInclusion(ctx context.Context, f tiles.Fetcher, index uint64, cp checkpoint.Checkpoint) ([]log.Hash, log.Hash, error) {
	if index >= cp.Size {
		return nil, log.Hash{}, fmt.Errorf("index %d is not below the checkpoint's size %d", index, cp.Size)
	}
	t := tiles.NewTree(cp.Size, cp.Root, f, nil)
	p, err := t.InclusionProof(ctx, index)
	if err != nil {
		return nil, log.Hash{}, err
	}
	entry, err := t.Leaf(ctx, index)
	return p, entry, err
}

// inclusionFromTiles is 'auditor inclusion --tiles': the checkpoint (given
// or the layout's), verified with tr, then the proof of entry index built
// from tiles authenticated against its root.
func (a *app) inclusionFromTiles(ctx context.Context, tr *trust, loc, notePath string, index uint64, leaf log.Hash, asJSON bool) error {
	f, err := openTiles(loc, tilesTimeout)
	if err != nil {
		return err
	}
	var n []byte
	if notePath != "" {
		if n, err = readSmall(notePath); err != nil {
			return err
		}
	} else if n, err = fetchTilesNote(ctx, f); err != nil {
		return unverifiablef("the layout's checkpoint: %v", err)
	}
	o := &proofOutput{}
	nc := tr.checkNote(n)
	o.addNote(nc, "checkpoint")
	if nc.Parsed {
		cp := nc.Checkpoint
		proof, entry, err := tilesInclusion(ctx, f, index, cp)
		switch {
		case index >= cp.Size:
			o.Findings = append(o.Findings, fmt.Sprintf("entry %d is beyond the checkpoint's size %d: the leaf is not at that index of this checkpoint", index, cp.Size))
		case err != nil:
			tilesProofError(o, err)
		default:
			if err := log.VerifyInclusion(leaf, index, cp.Size, proof, cp.Root); err != nil {
				o.Findings = append(o.Findings, fmt.Sprintf("leaf %x is not entry %d of the tree of size %d (the log's entry %d is %x): %v", leaf, index, cp.Size, index, entry, err))
			} else {
				o.ProofVerified = true
				if nc.Verdict() == disclosure.Sound {
					o.Proven = append(o.Proven, fmt.Sprintf("Leaf %x is entry %d of the log %s at size %d (root %s).", leaf, index, cp.Origin, cp.Size, hex.EncodeToString(cp.Root[:])))
				}
			}
		}
	}
	o.NotChecked = append(o.NotChecked, "That the leaf is the terminal hash of the run you hold: recompute it from the run's records (auditor verify does, for a package).")
	o.finish()
	return a.printProof("inclusion", o, []*disclosure.NoteCheck{nc}, asJSON)
}
