package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
	"github.com/runseal/runseal/store"
)

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
				var n []byte
				if cpPath != "" {
					if n, err = os.ReadFile(cpPath); err != nil {
						return fmt.Errorf("--checkpoint: %w", err)
					}
				} else if n, err = disclosure.LatestNote(ctx, s); errors.Is(err, disclosure.ErrNoCheckpoint) {
					return fmt.Errorf("this journal keeps no signed checkpoint: run 'journal checkpoint' (or 'journal serve --policy ...' to have it witnessed), or pass one with --checkpoint")
				} else if err != nil {
					return err
				}
				signed, err := disclosure.VerifyAgainst(n, logVKey, policy)
				if pe := (*disclosure.CheckpointPolicyError)(nil); errors.As(err, &pe) {
					return err
				} else if err != nil {
					return usageErrorf("--log-key and --policy: %v", err)
				}
				discKey, discVKey, err := a.disclosureKey(s.Origin(), true)
				if err != nil {
					return err
				}
				if disclosure.SameKeyMaterial(discVKey, logVKey) {
					return fmt.Errorf("the disclosure key %s is the log's key: give the journal a disclosure key of its own", a.disclosureKeyPath())
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
