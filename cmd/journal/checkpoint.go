package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/checkpointer"
	"github.com/runseal/runseal/store"
)

// envKey names the environment variable that overrides the key path.
const envKey = "RUNSEAL_KEY"

// keyPath is the log's private note key file (see location).
func (a *app) keyPath() string { return a.location().key }

// createKey writes a fresh Ed25519 note key for logOrigin to path, mode
// 0600, refusing to overwrite: a log's key is its identity to witnesses.
// The private key is never printed or logged.
func createKey(path, logOrigin string) (vkey string, err error) {
	skey, _, err := checkpoint.GenerateLogKey(rand.Reader, logOrigin)
	if err != nil {
		return "", fmt.Errorf("generate log key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("a key already exists at %s; it was not replaced", path)
	}
	if err != nil {
		return "", fmt.Errorf("create key file: %w", err)
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("write key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("write key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	_, vkey, err = loadSigner(path, logOrigin)
	return vkey, err
}

// loadSigner reads the key file and returns the signer named for origin
// (the key name is the checkpoint origin, as witnesses and tlog-policy
// expect; each tenant's origin gets its own name over the same key).
func loadSigner(path, origin string) (note.Signer, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("log key: %w (create one with 'journal init', or pass --key or $%s)", err, envKey)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, "", fmt.Errorf("log key %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("log key: %w", err)
	}
	s, vkey, err := checkpoint.SignerForOrigin(strings.TrimSpace(string(b)), origin)
	if err != nil {
		return nil, "", fmt.Errorf("log key %s: %w", path, err)
	}
	return s, vkey, nil
}

func (a *app) keyCmd() *cobra.Command {
	var asJSON, disc bool
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Print the log's verifier key (never the private key)",
		Long: `Print the verifier key of the log's note key for this tenant's origin: what
witnesses, auditors and monitors configure to check this journal's
checkpoints. The private key stays in its file (--key, $RUNSEAL_KEY, else the
journal path + ".key").

--disclosure prints the journal's disclosure verifier key instead: the key
that signs each disclosure package's statement (never the log key), which
auditors give "auditor verify --disclosure-key". It is created on first use
beside the log key (journal.db.disclosure.key, mode 0600).`,
		Example: `  journal key
  journal key --disclosure > disclosure.vkey
  journal key --tenant acme --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd.Context(), func(s journalStore) error {
				var vkey string
				var err error
				if disc {
					_, vkey, err = a.disclosureKey(s.Origin(), true)
				} else {
					_, vkey, err = loadSigner(a.keyPath(), s.Origin())
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, map[string]string{"origin": s.Origin(), "vkey": vkey})
				}
				_, err = fmt.Fprintln(a.stdout, vkey)
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {origin, vkey} as JSON")
	cmd.Flags().BoolVar(&disc, "disclosure", false, "print the disclosure verifier key (creating the key if the journal has none yet)")
	return cmd
}

func (a *app) checkpointCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Sign and keep the log's current checkpoint; print the signed note",
		Long: `Sign the tenant's current checkpoint (origin, size, root) with the log's
note key as a C2SP signed note, keep it in the journal, and print it.

A size that was already signed keeps its first note: signing again prints
the kept note, so one size is never published two ways.`,
		Example: `  journal checkpoint
  journal checkpoint --json`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.withStore(ctx, func(s journalStore) error {
				signer, _, err := loadSigner(a.keyPath(), s.Origin())
				if err != nil {
					return err
				}
				sc, err := checkpointer.SignAndKeep(ctx, s, signer)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, map[string]any{"origin": s.Origin(), "size": sc.Size,
						"root": base64.StdEncoding.EncodeToString(sc.Root[:]), "note": string(sc.Note), "signed_at": sc.SignedAt})
				}
				_, err = a.stdout.Write(sc.Note)
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {origin, size, root, note, signed_at} as JSON")
	return cmd
}

// checkpointFor returns the checkpoint a proof at size is against: the
// signed note kept for that size when there is one, else the unsigned body.
func checkpointFor(ctx context.Context, s journalStore, size uint64) (store.Checkpoint, string, error) {
	cp, err := s.CheckpointAt(ctx, size)
	if err != nil {
		return cp, "", err
	}
	sc, err := s.SignedCheckpointAt(ctx, size)
	if err != nil || sc == nil {
		return cp, "", err
	}
	return cp, string(sc.Note), nil
}

func b64(d store.Digest) string { return base64.StdEncoding.EncodeToString(d[:]) }

func b64s(ds []store.Digest) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = b64(d)
	}
	return out
}

func (a *app) printProof(asJSON bool, v map[string]any, cp store.Checkpoint, signed string, proof []store.Digest, lines ...string) error {
	pc := api.ProofCheckpoint{Origin: cp.Origin, Size: cp.Size, Root: b64(cp.Root), Note: signed}
	if asJSON {
		v["checkpoint"] = pc
		v["proof"] = b64s(proof)
		return writeJSON(a.stdout, v)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "against checkpoint %s size %d root %s", pc.Origin, pc.Size, pc.Root)
	if signed == "" {
		b.WriteString(" (that size was never signed: run 'journal checkpoint')")
	}
	b.WriteString("\nproof:\n")
	for _, p := range b64s(proof) {
		b.WriteString("  " + p + "\n")
	}
	if signed != "" {
		b.WriteString("signed checkpoint:\n" + signed)
	}
	_, err := fmt.Fprint(a.stdout, b.String())
	return err
}

func (a *app) proofCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proof",
		Short: "Print inclusion and consistency proofs of the log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("a proof kind is required: inclusion or consistency")
		},
	}
	cmd.AddCommand(a.proofInclusionCmd(), a.proofConsistencyCmd())
	return cmd
}

func (a *app) proofInclusionCmd() *cobra.Command {
	var size uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inclusion RUN [--size N]",
		Short: "Prove a sealed run is a leaf of the log",
		Long: `Print the RFC 6962 inclusion proof of sealed RUN's leaf (its terminal chain
hash) against the log at --size leaves (default: the current size), with the
checkpoint it is against. Hashes are base64. A run that is not sealed, or was
sealed at or after --size, has no proof: that is a failure (exit 1).`,
		Example: `  journal proof inclusion 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3
  journal proof inclusion 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --size 120 --json`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			run, err := parseRunArg(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.withStore(ctx, func(s journalStore) error {
				at := size
				if !cmd.Flags().Changed("size") {
					cur, err := s.Checkpoint(ctx)
					if err != nil {
						return err
					}
					at = cur.Size
				}
				inc, err := s.InclusionProofAt(ctx, run, at)
				if err != nil {
					return err
				}
				if inc == nil {
					return fmt.Errorf("run %s has no leaf in the log at size %d: it is not sealed, or was sealed later", run, at)
				}
				cp, signed, err := checkpointFor(ctx, s, at)
				if err != nil {
					return err
				}
				return a.printProof(asJSON, map[string]any{"run": run, "index": inc.Index, "size": inc.Size, "leaf": b64(inc.Leaf)}, cp, signed, inc.Proof,
					fmt.Sprintf("run %s is leaf %d of %d; leaf (its terminal chain hash) %s", run, inc.Index, inc.Size, b64(inc.Leaf)))
			})
		}),
	}
	cmd.Flags().Uint64Var(&size, "size", 0, "tree size to prove against (default: the current size)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {run, index, size, leaf, proof, checkpoint} as JSON")
	return cmd
}

func (a *app) proofConsistencyCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "consistency OLD [NEW]",
		Short: "Prove the log at NEW leaves extends the log at OLD leaves",
		Long: `Print the RFC 6962 consistency proof from size OLD to size NEW (default: the
current size), with the checkpoint at NEW it is against. Hashes are base64.
OLD above NEW, or NEW beyond the log, is refused.`,
		Example: `  journal proof consistency 10
  journal proof consistency 10 42 --json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			sizes := make([]uint64, len(args))
			for i, arg := range args {
				n, err := strconv.ParseUint(arg, 10, 64)
				if err != nil {
					return usageErrorf("size %q is not a non-negative integer", arg)
				}
				sizes[i] = n
			}
			ctx := cmd.Context()
			return a.withStore(ctx, func(s journalStore) error {
				newSize := uint64(0)
				if len(sizes) == 2 {
					newSize = sizes[1]
				} else {
					cur, err := s.Checkpoint(ctx)
					if err != nil {
						return err
					}
					newSize = cur.Size
				}
				p, err := s.ConsistencyProof(ctx, sizes[0], newSize)
				if err != nil {
					return err
				}
				oldCP, err := s.CheckpointAt(ctx, sizes[0])
				if err != nil {
					return err
				}
				cp, signed, err := checkpointFor(ctx, s, newSize)
				if err != nil {
					return err
				}
				return a.printProof(asJSON, map[string]any{"old_size": sizes[0], "new_size": newSize, "old_root": b64(oldCP.Root)}, cp, signed, p,
					fmt.Sprintf("log at %d leaves (root %s) is a prefix of the log at %d leaves", sizes[0], b64(oldCP.Root), newSize))
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {old_size, new_size, old_root, proof, checkpoint} as JSON")
	return cmd
}
