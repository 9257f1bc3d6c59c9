package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/tiles"
)

// maxSmallFile bounds the notes and proofs these commands read: a signed
// note is at most 1 MiB, a proof a few kilobytes.
const maxSmallFile = 2 << 20

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unverifiablef("%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSmallFile+1))
	if err != nil {
		return nil, unverifiablef("%s: %v", path, err)
	}
	if len(b) > maxSmallFile {
		return nil, verdictError(exitNotSound, "%s is larger than %d bytes: not a note or a proof", path, maxSmallFile)
	}
	return b, nil
}

// proofOutput is what consistency and inclusion print with --json.
type proofOutput struct {
	Verdict       disclosure.Verdict             `json:"verdict"`
	ExitCode      int                            `json:"exit_code"`
	Checkpoints   []*disclosure.CheckpointReport `json:"checkpoints"`
	ProofVerified bool                           `json:"proof_verified"`
	Proven        []string                       `json:"proven"`
	Findings      []string                       `json:"findings"`
	Unverifiable  []string                       `json:"unverifiable"`
	NotChecked    []string                       `json:"not_checked"`
}

func (o *proofOutput) addNote(nc *disclosure.NoteCheck, what string) {
	o.Checkpoints = append(o.Checkpoints, &nc.Report)
	for _, f := range nc.Findings {
		o.Findings = append(o.Findings, what+": "+f)
	}
	for _, u := range nc.Unverifiable {
		o.Unverifiable = append(o.Unverifiable, what+": "+u)
	}
}

func (o *proofOutput) finish() {
	switch {
	case len(o.Findings) > 0:
		o.Verdict, o.ExitCode = disclosure.NotSound, exitNotSound
	case len(o.Unverifiable) > 0:
		o.Verdict, o.ExitCode = disclosure.Unverifiable, exitUnverifiable
	default:
		o.Verdict, o.ExitCode = disclosure.Sound, exitSound
	}
	for _, s := range []*[]string{&o.Proven, &o.Findings, &o.Unverifiable, &o.NotChecked} {
		if *s == nil {
			*s = []string{}
		}
	}
}

func (a *app) printProof(title string, o *proofOutput, notes []*disclosure.NoteCheck, asJSON bool) error {
	if asJSON {
		if err := writeJSON(a.stdout, o); err != nil {
			return err
		}
	} else {
		verdict := map[disclosure.Verdict]string{disclosure.Sound: "VERIFIED", disclosure.NotSound: "NOT SOUND", disclosure.Unverifiable: "UNVERIFIABLE"}[o.Verdict]
		fmt.Fprintf(a.stdout, "%s: %s\n", title, verdict)
		for _, nc := range notes {
			fmt.Fprint(a.stdout, describeNote(nc))
		}
		for _, sec := range []struct {
			name  string
			items []string
		}{{"Findings", o.Findings}, {"Not established", o.Unverifiable}, {"Proven", o.Proven}, {"Not checked", o.NotChecked}} {
			if len(sec.items) > 0 {
				fmt.Fprintf(a.stdout, "\n%s:\n", sec.name)
				for _, s := range sec.items {
					fmt.Fprintf(a.stdout, "  - %s\n", s)
				}
			}
		}
	}
	if o.ExitCode != exitSound {
		return verdictError(o.ExitCode, "%s: %s", title, o.Verdict)
	}
	return nil
}

func (a *app) consistencyCmd() *cobra.Command {
	var tf trustFlags
	var oldPath, newPath, tilesLoc string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "consistency --old OLD_NOTE (--new NEW_NOTE PROOF | --tiles URL|DIR [--new NEW_NOTE])",
		Short: "Verify that one signed checkpoint extends another",
		Long: `Verify a consistency proof between two signed checkpoints of one log: both
notes must carry the log's signature (and meet the witness policy), have the
same origin, and PROOF must show that the tree at the old size is a prefix of
the tree at the new size (RFC 6962). The sizes and roots come from the signed
notes, never from the proof.

PROOF is either the JSON journal serve answers to GET /v1/proof/consistency
(spec/http.md) or "journal proof consistency --json" prints, whose old_size
and new_size must be the two checkpoints' sizes; or one standard base64 hash
per line, an empty file being the empty proof (equal sizes, or from size 0).
With --tiles URL|DIR the proof is built from the log's C2SP tlog-tiles layout
instead (spec/tiles.md), each tile authenticated against the new checkpoint's
root; --new then defaults to the layout's checkpoint-witnessed (else
checkpoint). A tile that is malformed or does not lead to the root is named
and gives no verdict (3).

Exit codes: 0 consistent; 1 not consistent, or a note is false; 3 a note
could not be established with the keys given, or a file could not be read;
2 usage error.`,
		Example: `  curl -s "$LOG/v1/checkpoint/120" > cp120.note
  curl -s "$LOG/v1/checkpoint/witnessed" > cp180.note
  curl -s "$LOG/v1/proof/consistency?old=120&new=180" > p.json
  auditor consistency --old cp120.note --new cp180.note p.json --log-key @log.vkey --policy p.policy`,
		Args: cobra.RangeArgs(0, 1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			if oldPath == "" || (newPath == "" && tilesLoc == "") {
				return usageErrorf("--old and --new are required")
			}
			if (len(args) == 1) == (tilesLoc != "") {
				return usageErrorf("give either PROOF or --tiles URL|DIR")
			}
			tr, err := tf.load()
			if err != nil {
				return err
			}
			oldNote, err := readSmall(oldPath)
			if err != nil {
				return err
			}
			var fetcher tiles.Fetcher
			var newNote, proofText []byte
			if tilesLoc != "" {
				if fetcher, err = openTiles(tilesLoc, tilesTimeout); err != nil {
					return err
				}
			}
			if newPath != "" {
				newNote, err = readSmall(newPath)
			} else {
				newNote, err = tiles.LatestNote(cmd.Context(), fetcher)
			}
			if err != nil {
				return unverifiablef("the new checkpoint: %v", err)
			}
			if len(args) == 1 {
				if proofText, err = readSmall(args[0]); err != nil {
					return err
				}
			}
			o := &proofOutput{}
			oldNC, newNC := tr.checkNote(oldNote), tr.checkNote(newNote)
			o.addNote(oldNC, "old checkpoint")
			o.addNote(newNC, "new checkpoint")
			var proof []log.Hash
			var perr error
			var sizes *jsonProof
			var terr error
			switch {
			case fetcher != nil && oldNC.Parsed && newNC.Parsed:
				proof, terr = tilesConsistency(cmd.Context(), fetcher, oldNC.Checkpoint.Size, newNC.Checkpoint)
			case fetcher != nil:
			case isJSON(proofText):
				sizes, proof, perr = parseJSONProof(proofText, false)
			default:
				proof, perr = disclosure.ParseProofLines(proofText)
			}
			switch {
			case perr != nil:
				o.Findings = append(o.Findings, "the proof file is malformed: "+perr.Error())
			case !oldNC.Parsed || !newNC.Parsed:
			case oldNC.Checkpoint.Origin == newNC.Checkpoint.Origin && terr != nil:
				tilesProofError(o, terr)
			case sizes != nil && (!sizes.has["old_size"] || !sizes.has["new_size"] || sizes.consistency.OldSize != oldNC.Checkpoint.Size || sizes.consistency.NewSize != newNC.Checkpoint.Size):
				o.Unverifiable = append(o.Unverifiable, fmt.Sprintf("the proof file is not for sizes %d to %d: give the proof between these two checkpoints", oldNC.Checkpoint.Size, newNC.Checkpoint.Size))
			case oldNC.Checkpoint.Origin != newNC.Checkpoint.Origin:
				o.Unverifiable = append(o.Unverifiable, fmt.Sprintf("the checkpoints are of two logs (%q and %q): there is nothing to compare", oldNC.Checkpoint.Origin, newNC.Checkpoint.Origin))
			default:
				oc, nc := oldNC.Checkpoint, newNC.Checkpoint
				if err := log.VerifyConsistency(oc.Size, nc.Size, oc.Root, nc.Root, proof); err != nil {
					o.Findings = append(o.Findings, fmt.Sprintf("the proof does not show size %d extends size %d: %v", nc.Size, oc.Size, err))
				} else {
					o.ProofVerified = true
					if oldNC.Verdict() == disclosure.Sound && newNC.Verdict() == disclosure.Sound {
						o.Proven = append(o.Proven, fmt.Sprintf("The log %s at size %d (root %x) is a prefix of the log at size %d (root %x): nothing was removed or changed between these checkpoints.",
							oc.Origin, oc.Size, oc.Root, nc.Size, nc.Root))
					}
				}
			}
			o.NotChecked = append(o.NotChecked, "Any checkpoint other than these two, and whether the log shows others a different history: follow it with auditor monitor.")
			o.finish()
			return a.printProof("consistency", o, []*disclosure.NoteCheck{oldNC, newNC}, asJSON)
		}),
	}
	tf.register(cmd.Flags())
	cmd.Flags().StringVar(&oldPath, "old", "", "the older signed checkpoint note")
	cmd.Flags().StringVar(&newPath, "new", "", "the newer signed checkpoint note")
	cmd.Flags().StringVar(&tilesLoc, "tiles", "", "build the proof from the log's tlog-tiles layout (a URL prefix or a directory) instead of a PROOF file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func (a *app) inclusionCmd() *cobra.Command {
	var tf trustFlags
	var leafArg, notePath, tilesLoc string
	var index uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inclusion (PROOF | --tiles URL|DIR --index N) --leaf HASH [--checkpoint NOTE]",
		Short: "Verify that a sealed run's terminal hash is in a signed checkpoint",
		Long: `Verify an inclusion proof: the signed checkpoint it is against (log
signature, witness policy), then that the leaf is at the proof's index in that
checkpoint's tree, whose size and root come from the signed note alone. For a
runseal log the leaf is a sealed run's terminal hash (the hash of its last
record): give it with --leaf (hex or base64), computed from the run's records,
never taken from the proof file.

PROOF is one of:
  - a C2SP tlog-proof file (it carries its signed checkpoint);
  - the JSON journal serve answers to GET /v1/proof/inclusion (spec/http.md)
    or "journal proof inclusion --json" prints; its size must be the
    checkpoint's. The signed checkpoint comes from --checkpoint NOTE (for
    example GET /v1/checkpoint/{size}), else from the JSON's checkpoint.note.

With --tiles URL|DIR and --index N instead of PROOF, the proof of entry N is
built from the log's C2SP tlog-tiles layout (spec/tiles.md), each tile
authenticated against the checkpoint's root; the checkpoint is --checkpoint
NOTE, else the layout's checkpoint-witnessed (else checkpoint). A tile that
is malformed or does not lead to the root is named and gives no verdict (3).

Exit codes: 0 included; 1 not included, or the checkpoint is false; 3 the
checkpoint could not be established with the keys given, or a file could
not be read; 2 usage error.`,
		Example: `  curl -s "$LOG/v1/proof/inclusion?run=01J9Z8Q4W5X6Y7Z8A9B0C1D2E3&size=180" > p.json
  curl -s "$LOG/v1/checkpoint/180" > cp180.note
  auditor inclusion p.json --checkpoint cp180.note --leaf 0f4a84f6...19e8 --log-key @log.vkey --witness @w1.vkey
  auditor inclusion run.tlog-proof --leaf 0f4a84f6...19e8 --log-key @log.vkey --policy p.policy`,
		Args: cobra.RangeArgs(0, 1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			leaf, err := parseLeaf(leafArg)
			if err != nil {
				return usageErrorf("--leaf: %v", err)
			}
			if (len(args) == 1) == (tilesLoc != "") || (tilesLoc != "") != cmd.Flags().Changed("index") {
				return usageErrorf("give either PROOF, or --tiles URL|DIR with --index N")
			}
			tr, err := tf.load()
			if err != nil {
				return err
			}
			if tilesLoc != "" {
				return a.inclusionFromTiles(cmd.Context(), tr, tilesLoc, notePath, index, leaf, asJSON)
			}
			b, err := readSmall(args[0])
			if err != nil {
				return err
			}
			o := &proofOutput{}
			var index uint64
			var proof []log.Hash
			var n []byte
			var size *uint64
			var extra bool
			if isJSON(b) {
				jp, hs, err := parseJSONProof(b, true)
				if err == nil && !jp.has["index"] {
					err = fmt.Errorf("the JSON has no \"index\"")
				}
				if err != nil {
					o.Findings = append(o.Findings, "the proof file is malformed: "+err.Error())
					o.finish()
					return a.printProof("inclusion", o, nil, asJSON)
				}
				index, proof = jp.inclusion.Index, hs
				if jp.has["size"] {
					size = &jp.inclusion.Size
				}
				if jp.checkpoint != nil {
					n = []byte(jp.checkpoint.Note)
				}
			} else {
				p, err := disclosure.ParseTLogProof(b)
				if err != nil {
					o.Findings = append(o.Findings, err.Error())
					o.finish()
					return a.printProof("inclusion", o, nil, asJSON)
				}
				index, proof, n, extra = p.Index, p.Proof, p.Note, p.Extra != nil
			}
			if notePath != "" {
				if n, err = readSmall(notePath); err != nil {
					return err
				}
			}
			if len(n) == 0 {
				return usageErrorf("the proof carries no signed checkpoint: give it with --checkpoint NOTE")
			}
			nc := tr.checkNote(n)
			o.addNote(nc, "checkpoint")
			switch {
			case !nc.Parsed:
			case size != nil && *size != nc.Checkpoint.Size:
				o.Unverifiable = append(o.Unverifiable, fmt.Sprintf("the proof is for size %d, the checkpoint is size %d: give the checkpoint of the proof's size", *size, nc.Checkpoint.Size))
			default:
				cp := nc.Checkpoint
				if err := log.VerifyInclusion(leaf, index, cp.Size, proof, cp.Root); err != nil {
					o.Findings = append(o.Findings, fmt.Sprintf("leaf %x is not at index %d of the tree of size %d: %v", leaf, index, cp.Size, err))
				} else {
					o.ProofVerified = true
					if nc.Verdict() == disclosure.Sound {
						o.Proven = append(o.Proven, fmt.Sprintf("Leaf %x is entry %d of the log %s at size %d (root %s).", leaf, index, cp.Origin, cp.Size, hex.EncodeToString(cp.Root[:])))
					}
				}
			}
			if extra {
				o.NotChecked = append(o.NotChecked, "The proof's extra line: it is unauthenticated.")
			}
			o.NotChecked = append(o.NotChecked, "That the leaf is the terminal hash of the run you hold: recompute it from the run's records (auditor verify does, for a package).")
			o.finish()
			return a.printProof("inclusion", o, []*disclosure.NoteCheck{nc}, asJSON)
		}),
	}
	tf.register(cmd.Flags())
	cmd.Flags().StringVar(&leafArg, "leaf", "", "the sealed run's terminal hash, the leaf to prove (64 hex characters or base64)")
	cmd.Flags().StringVar(&tilesLoc, "tiles", "", "build the proof from the log's tlog-tiles layout (a URL prefix or a directory) instead of a PROOF file")
	cmd.Flags().Uint64Var(&index, "index", 0, "with --tiles, the leaf's index in the log (its seal order, from 0)")
	cmd.Flags().StringVar(&notePath, "checkpoint", "", "the signed checkpoint note the proof is against (needed for a JSON proof without one)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	_ = cmd.MarkFlagRequired("leaf")
	return cmd
}
