package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/tiles"
)

// openTiles opens --tiles LOC: an http(s) URL of a layout's prefix, or a
// local directory as 'journal tiles sync' writes it.
func openTiles(loc string, timeout time.Duration) (tiles.Fetcher, error) {
	f, err := tiles.Open(loc, &http.Client{Timeout: timeout})
	if err != nil {
		return nil, usageErrorf("--tiles: %v", err)
	}
	return f, nil
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
	} else if n, err = tiles.LatestNote(ctx, f); err != nil {
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
