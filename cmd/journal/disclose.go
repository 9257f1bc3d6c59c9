package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
)

func (a *app) exportCmd() *cobra.Command {
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "export --out FILE",
		Short: "Write every run of the tenant, with its exact bytes and log positions, for restore",
		Long: `Write a whole export of the tenant (spec/disclosure.md section 5): every run,
every record with its exact stored bytes, and every sealed run's log index
and leaf, as of the log's checkpoint when the export begins (runs sealed
later are exported unsealed). Memory stays constant whatever the journal's
size. The disclosure register, leases and cancellation requests are not
exported.

--out - writes to stdout (the summary then goes to stderr); a file is
created new and never replaces one, and is removed if the export fails. An
export carries no signature: it is for "journal restore", not for auditors.`,
		Example: `  journal export --out acme.export.jsonl
  journal export --tenant acme --out - | gzip > acme.export.jsonl.gz`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErrorf("--out FILE is required (- for stdout)")
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				var w io.Writer = a.stdout
				var f *os.File
				report := a.stdout
				if out != "-" {
					var err error
					if f, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
						if errors.Is(err, fs.ErrExist) {
							return fmt.Errorf("%s already exists; an export never replaces a file", out)
						}
						return err
					}
					w = f
				} else {
					report = a.stderr
				}
				sum, err := disclosure.Export(cmd.Context(), s, w)
				if f != nil {
					if err == nil {
						err = f.Sync()
					}
					if cerr := f.Close(); err == nil {
						err = cerr
					}
					if err != nil {
						os.Remove(out)
					}
				}
				if err != nil {
					return fmt.Errorf("export: %w", err)
				}
				if asJSON {
					return writeJSON(report, sum)
				}
				_, err = fmt.Fprintf(report, "exported %d runs (%d sealed), %d records, %d bytes; log %s size %d root %s; sha256 %s\n",
					sum.Runs, sum.Sealed, sum.Records, sum.Bytes, sum.Checkpoint.Origin, sum.Checkpoint.Size, sum.Checkpoint.Root, sum.SHA256)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "the export file to create, or - for stdout (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}

func (a *app) restoreCmd() *cobra.Command {
	var asJSON, resume bool
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Rebuild a journal from an export; succeed only if its log is the exported one",
		Long: `Replay an export (from "journal export") into the journal: first read it whole
and refuse, writing nothing, if it is cut, of an unknown version, malformed,
a disclosure package, or if the journal already holds any of its runs or
admission keys or has a non-empty log; then append every run's records
with their exact bytes, hundreds of runs per transaction with every check
of the ordinary append (SQLite and PostgreSQL), and seal the sealed runs in
log-index order, in bulks too. On a terminal stderr shows a progress bar per
phase with its rate and the time left; otherwise progress goes to the log.

The restore succeeds only if the rebuilt log has the export's size and root.
Create the target with "journal init" first; its origin may differ from the
export's (the tree is the same, its name is not). FILE must be a regular
file: it is read twice. Memory does not grow with the export: what spans the
whole file is kept in temporary files under $TMPDIR (about 64 bytes per
sealed run and 48 per admission key).

A restore that was interrupted (killed, a full disk) is finished by running it
again with --resume on the same target and FILE: runs and leaves the target
already holds are checked against the export (each run's last record hash,
the log's root) and skipped, so no run is duplicated; a target holding
anything else is refused, naming the run or log at fault.`,
		Example: `  journal init --db restored.db --origin example.com/log
  journal restore acme.export.jsonl --db restored.db --tenant acme
  journal restore acme.export.jsonl --db restored.db --tenant acme --resume`,
		Args: cobra.ExactArgs(1),
		RunE: wrapRun(func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			return a.withStore(cmd.Context(), func(s journalStore) error {
				progress := newRestoreProgress(a.stderr, a.log) // restore_progress.go
				rep, err := disclosure.RestoreWith(cmd.Context(), s, f, disclosure.RestoreOptions{Resume: resume, Progress: progress.update})
				progress.end()
				if rep != nil && (err == nil || asJSON) {
					if asJSON {
						if werr := writeJSON(a.stdout, rep); werr != nil {
							return werr
						}
					} else {
						if rep.Resumed {
							fmt.Fprintf(a.stdout, "resumed: the target already held %d records and %d leaves of the export\n", rep.ResumedRecords, rep.ResumedLeaves)
						}
						fmt.Fprintf(a.stdout, "restored %d runs (%d sealed), %d records; log size %d root %s (the export's: size %d root %s)\n",
							rep.Runs, rep.Sealed, rep.Records, rep.Rebuilt.Size, rep.Rebuilt.Root, rep.Expected.Size, rep.Expected.Root)
						if rep.OriginChanged {
							fmt.Fprintf(a.stdout, "the log's origin is now %q (it was %q)\n", rep.Rebuilt.Origin, rep.Expected.Origin)
						}
						if rep.ConcludedUnsealed > 0 {
							fmt.Fprintf(a.stdout, "%d runs concluded with a sealing outcome but had no leaf in the export: seal them to continue\n", rep.ConcludedUnsealed)
						}
						if rep.Awaiting > 0 {
							fmt.Fprintf(a.stdout, "%d runs came back suspended: resume them to act on their wait\n", rep.Awaiting)
						}
						fmt.Fprintf(a.stdout, "not carried by an export: %s\n", strings.Join(rep.NotCarried, "; "))
					}
				}
				if err != nil {
					return fmt.Errorf("restore: %w", err)
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the restore report as JSON")
	cmd.Flags().BoolVar(&resume, "resume", false, "finish an interrupted restore of the same export into this target")
	return cmd
}

func (a *app) discloseCmd() *cobra.Command {
	var runs, cases, witnesses []string
	var recipient, out, cpPath, logKey, policyPath, by string
	var quorum int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "disclose --runs R,... --cases C,... --recipient WHO --out FILE",
		Short: "Write a disclosure package of selected runs and cases, and record the act",
		Long: `Write a disclosure package (spec/disclosure.md) of the runs selected with
--runs and every run that wrote a record stamped with a case in --cases,
against a witnessed checkpoint: each sealed run carries its inclusion proof
against it, unsealed runs are marked unsealed.

The checkpoint is --checkpoint FILE (a signed note with its cosignatures,
for example from the log's witnessed-checkpoint endpoint), else the latest
checkpoint this journal keeps. It must be signed by this journal's log key
and meet the witness policy: --witness keys with --quorum K (default all),
or --policy FILE (C2SP tlog-policy; "quorum none" discloses against an
unwitnessed checkpoint on purpose). A run sealed after the checkpoint, or
concluded but not yet sealed, is refused: seal it, get a newer witnessed
checkpoint, and disclose again.

The package is written to a private staging file beside FILE, the act (who,
the selection, the recipient, the checkpoint, the package's SHA-256) is
recorded in the journal's disclosure register, and only then is FILE put in
place. FILE must not exist. List the register with "journal disclosures".`,
		Example: `  journal disclose --runs 01J9Z8Q4W5X6Y7Z8A9B0C1D2E3 --cases 01J9Z8Q4W5X6Y7Z8A9B0C1D2F4 \
      --recipient "auditor@regulator.example" --out pkg.jsonl \
      --checkpoint witnessed.note --witness @w1.vkey --witness @w2.vkey --quorum 2`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			var sel disclosure.Selection
			for _, r := range splitList(runs) {
				id, err := parseRunArg(r)
				if err != nil {
					return err
				}
				sel.Runs = append(sel.Runs, id)
			}
			for _, c := range splitList(cases) {
				id, err := store.ParseCaseID(c)
				if err != nil {
					return usageErrorf("--cases: %q is not a case id", c)
				}
				sel.Cases = append(sel.Cases, id)
			}
			if len(sel.Runs) == 0 && len(sel.Cases) == 0 {
				return usageErrorf("select at least one run (--runs) or case (--cases)")
			}
			if err := store.ValidateRecipient(recipient); err != nil {
				return usageErrorf("--recipient: %v", err)
			}
			if out == "" {
				return usageErrorf("--out FILE is required")
			}
			if by == "" {
				by = os.Getenv("USER")
			}
			if by == "" {
				by = "operator"
			}
			op := store.Operator{Actor: by, Basis: store.Asserted}
			if err := op.Validate(); err != nil {
				return usageErrorf("--by: %v", err)
			}
			policy, err := loadPolicy(witnesses, quorum, policyPath)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.withStore(ctx, func(s journalStore) error {
				logVKey, err := a.logVKey(logKey, s.Origin())
				if err != nil {
					return err
				}
				// A log key also named by the policy's log line is one key.
				logs, err := disclosure.MergeLogKeys([]string{logVKey}, policy)
				if err != nil {
					return usageErrorf("--log-key and --policy: %v", err)
				}
				discKey, discVKey, err := a.disclosureKey(s.Origin(), true)
				if err != nil {
					return err
				}
				if disclosure.SameKeyMaterial(discVKey, logVKey) {
					return fmt.Errorf("the disclosure key %s is the log's key: give the journal a disclosure key of its own", a.disclosureKeyPath())
				}
				var n []byte
				if cpPath != "" {
					if n, err = os.ReadFile(cpPath); err != nil {
						return fmt.Errorf("--checkpoint: %w", err)
					}
				} else {
					// The newest checkpoint the publisher saw witnessed; a
					// store that publishes nothing falls back to the newest
					// signed one, which the policy check below judges.
					var sc *store.SignedCheckpoint
					if ps, ok := s.(store.PublicationStore); ok {
						if sc, err = ps.LatestWitnessed(ctx); err != nil {
							return err
						}
					}
					if sc == nil {
						if sc, err = s.LatestCheckpoint(ctx); err != nil {
							return err
						}
					}
					if sc == nil {
						return fmt.Errorf("this journal keeps no signed checkpoint: run 'journal checkpoint' (or 'journal serve --policy ...' to have it witnessed), or pass one with --checkpoint")
					}
					n = sc.Note
				}
				signed, err := policy.Verify(n, logs...)
				if err != nil {
					return fmt.Errorf("the checkpoint does not meet the log key and witness policy: %w", err)
				}
				act, err := disclosure.Disclose(ctx, s, s, out, disclosure.Request{Selection: sel, Checkpoint: signed, Recipient: recipient, By: op, Key: discKey})
				var up *disclosure.UnplacedRunError
				if errors.As(err, &up) {
					return fmt.Errorf("%w; nothing was written or recorded", err)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, struct {
						store.Disclosure
						DisclosureKey string `json:"disclosure_key"`
					}{act, discVKey})
				}
				_, err = fmt.Fprintf(a.stdout, "disclosed %d runs (%d sealed), %d records to %s in %s (%d bytes, sha256 %s)\nagainst checkpoint %s size %d; recorded as %s by %s\nstatement signed by disclosure key %s\n",
					act.Carried, act.Sealed, act.Records, act.Recipient, out, act.Bytes, act.Package, act.Checkpoint.Origin, act.Checkpoint.Size, act.ID, act.By.Actor, discVKey)
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringSliceVar(&runs, "runs", nil, "run ids to disclose, comma-separated or repeated")
	f.StringSliceVar(&cases, "cases", nil, "case ids whose runs to disclose, comma-separated or repeated")
	f.StringVar(&recipient, "recipient", "", "to whom the package goes, as recorded (required)")
	f.StringVar(&out, "out", "", "the package file to create (required; must not exist)")
	f.StringVar(&cpPath, "checkpoint", "", "the witnessed signed checkpoint note to disclose against (default: the newest witnessed one this journal keeps, else its newest signed one)")
	f.StringVar(&logKey, "log-key", "", "the log's verifier key or @FILE (default: derived from the journal's key file)")
	f.StringArrayVar(&witnesses, "witness", nil, "a witness's cosignature verifier key, or @FILE (repeatable)")
	f.IntVar(&quorum, "quorum", 0, "how many --witness keys must have cosigned (default: all)")
	f.StringVar(&policyPath, "policy", "", "a C2SP tlog-policy file instead of --witness/--quorum")
	f.StringVar(&by, "by", "", "who discloses, as recorded (default $USER; asserted, not proven)")
	f.BoolVar(&asJSON, "json", false, "print the recorded act as JSON")
	return cmd
}

// splitList drops empty items of a comma-separated flag.
func splitList(items []string) []string {
	var out []string
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// keyArg reads a key argument, from a file when it starts with @.
func keyArg(flag, v string) (string, error) {
	if !strings.HasPrefix(v, "@") {
		return v, nil
	}
	b, err := os.ReadFile(v[1:])
	if err != nil {
		return "", usageErrorf("--%s %s: %v", flag, v, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// loadPolicy builds the witness policy a disclosure's checkpoint must meet.
// There is no default: a forgotten flag must not mean "no witness needed".
func loadPolicy(witnesses []string, quorum int, path string) (*checkpoint.Policy, error) {
	switch {
	case path != "" && (len(witnesses) > 0 || quorum != 0):
		return nil, usageErrorf("give either --policy or --witness/--quorum, not both")
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usageErrorf("--policy: %v", err)
		}
		p, err := checkpoint.ParsePolicy(b)
		if err != nil {
			return nil, usageErrorf("--policy %s: %v", path, err)
		}
		return p, nil
	case len(witnesses) == 0:
		return nil, usageErrorf("give the witness policy the checkpoint must meet: --witness keys (and --quorum), or --policy FILE (\"quorum none\" to disclose against an unwitnessed checkpoint on purpose)")
	}
	var vs []*checkpoint.CosignatureVerifier
	for _, w := range witnesses {
		k, err := keyArg("witness", w)
		if err != nil {
			return nil, err
		}
		v, err := checkpoint.NewCosignatureVerifier(k)
		if err != nil {
			return nil, usageErrorf("--witness %q: %v", w, err)
		}
		vs = append(vs, v)
	}
	if quorum == 0 {
		quorum = len(vs)
	}
	p, err := checkpoint.NewThresholdPolicy(quorum, vs...)
	if err != nil {
		return nil, usageErrorf("--witness/--quorum: %v", err)
	}
	return p, nil
}

// logVKey is the log's verifier key: --log-key, else the one derived from
// the journal's private key file for this tenant's origin.
func (a *app) logVKey(flag, origin string) (string, error) {
	vkey := ""
	if flag != "" {
		k, err := keyArg("log-key", flag)
		if err != nil {
			return "", err
		}
		vkey = k
	} else {
		_, k, err := loadSigner(a.keyPath(), origin)
		if err != nil {
			return "", fmt.Errorf("%w (or pass the log's verifier key with --log-key)", err)
		}
		vkey = k
	}
	v, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return "", usageErrorf("--log-key: %v", err)
	}
	if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
		return "", usageErrorf("--log-key is a witness key")
	}
	return vkey, nil
}

// disclosureKeyPath is the journal's disclosure key: beside the log key,
// "<name>.disclosure.key" for a log key "<name>.key" (journal.db.key gives
// journal.db.disclosure.key), else the log key's path + ".disclosure".
func (a *app) disclosureKeyPath() string {
	p := a.keyPath()
	if p == "" {
		return ""
	}
	if base, ok := strings.CutSuffix(p, ".key"); ok {
		return base + ".disclosure.key"
	}
	return p + ".disclosure"
}

// disclosureKey loads the journal's disclosure key, the Ed25519 note key
// that signs each package's statement (spec/disclosure.md section 2.7),
// named for this tenant's origin + "/disclosure". It is a key of its own,
// never the log's checkpoint key: a package statement and a checkpoint are
// signed by different keys, and an auditor is given both verifier keys.
// With create, a missing key is made as the log key is (fresh random
// Ed25519, mode 0600, created new, never printed); "journal key
// --disclosure" prints its verifier key.
func (a *app) disclosureKey(origin string, create bool) (note.Signer, string, error) {
	path := a.disclosureKeyPath()
	if path == "" {
		return nil, "", usageErrorf("a postgres:// store keeps no key file beside it: give --key FILE (the disclosure key is FILE's name with .disclosure.key)")
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && create {
		if _, err := createKey(path, origin+disclosure.DisclosureKeySuffix); err != nil {
			return nil, "", fmt.Errorf("disclosure key: %w", err)
		}
		a.log.Info("created the journal's disclosure key", "key", path)
	}
	s, vkey, err := loadSigner(path, origin+disclosure.DisclosureKeySuffix)
	if err != nil {
		return nil, "", fmt.Errorf("disclosure key: %w", err)
	}
	return s, vkey, nil
}

func (a *app) disclosuresCmd() *cobra.Command {
	var after string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "disclosures",
		Short: "List the disclosure register: who disclosed what to whom",
		Long: `List the tenant's acts of disclosure, oldest first: id, time, who, recipient,
the selection, the checkpoint, and the SHA-256 of the package delivered (an
auditor's "auditor verify" prints the same digest for the file it received).
The register is kept beside the journal, unchained, and never exported.`,
		Example: `  journal disclosures
  journal disclosures --json | jq -r 'select(.recipient | test("regulator")) | .package'`,
		Args: cobra.NoArgs,
		RunE: wrapRun(func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > store.MaxLimit {
				return usageErrorf("--limit %d: must be from 1 to %d", limit, store.MaxLimit)
			}
			return a.withStore(cmd.Context(), func(s journalStore) error {
				acts, err := s.Disclosures(cmd.Context(), after, limit)
				if err != nil {
					return err
				}
				for _, d := range acts {
					if asJSON {
						if err := writeJSON(a.stdout, d); err != nil {
							return err
						}
						continue
					}
					signed := d.SignedBy
					if signed == "" {
						signed = "(no statement: recorded before packages were signed)"
					}
					fmt.Fprintf(a.stdout, "%s  %s  by %s (%s) to %s: %d runs, %d cases selected; %d runs (%d sealed), %d records; checkpoint %s size %d; package sha256 %s, %d bytes; signed by %s\n",
						d.ID, d.At.Format("2006-01-02T15:04:05Z"), d.By.Actor, d.By.Basis, d.Recipient, len(d.Runs), len(d.Cases),
						d.Carried, d.Sealed, d.Records, d.Checkpoint.Origin, d.Checkpoint.Size, d.Package, d.Bytes, signed)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&after, "after", "", "list acts after this id (for paging)")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many acts")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per act (JSON Lines)")
	return cmd
}
