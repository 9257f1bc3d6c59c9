package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
)

// trustFlags are the keys and the witness policy a command trusts.
type trustFlags struct {
	logKeys        []string
	witnesses      []string
	quorum         int
	policy         string
	disclosureKeys []string // verify only
}

func (t *trustFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&t.logKeys, "log-key", nil, "the log's note verifier key, or @FILE holding it (repeatable, for a rotated key; a key the --policy's log line also names is one key)")
	fs.StringArrayVar(&t.witnesses, "witness", nil, "a witness's cosignature/v1 verifier key, or @FILE (repeatable)")
	fs.IntVar(&t.quorum, "quorum", 0, "how many of the --witness keys must have cosigned (default: all of them)")
	fs.StringVar(&t.policy, "policy", "", "a C2SP tlog-policy file (log, witness, group and quorum lines) instead of --witness and --quorum")
}

// registerDisclosure adds --disclosure-key, for the commands that check a
// package's signed statement.
func (t *trustFlags) registerDisclosure(fs *pflag.FlagSet) {
	fs.StringArrayVar(&t.disclosureKeys, "disclosure-key", nil, "the journal's disclosure verifier key (journal key --disclosure), or @FILE (repeatable); never a log key")
}

// trust is what the flags resolve to.
type trust struct {
	opts disclosure.Options
	// logKeys and policyText are kept verbatim for evidence files, so that
	// whoever reads the evidence can check it with the same keys.
	logKeys    []string
	policyText string
}

// keyArg returns a key argument, reading it from a file when it starts with @.
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

// load resolves the flags. Anything malformed is a usage error: the
// auditor never starts checking with keys it could not read. A log key
// given with --log-key and in the policy's log line is one key
// (disclosure.MergeLogKeys, the one place keys are merged).
func (t *trustFlags) load() (*trust, error) {
	tr := &trust{}
	var vkeys []string
	for _, k := range t.logKeys {
		vk, err := keyArg("log-key", k)
		if err != nil {
			return nil, err
		}
		v, err := checkpoint.NewVerifier(vk)
		if err != nil {
			return nil, usageErrorf("--log-key %q: %v", k, err)
		}
		if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
			return nil, usageErrorf("--log-key %q is a witness (cosignature) key; give it with --witness", k)
		}
		vkeys = append(vkeys, vk)
	}
	switch {
	case t.policy != "" && (len(t.witnesses) > 0 || t.quorum != 0):
		return nil, usageErrorf("give either --policy or --witness/--quorum, not both")
	case t.quorum != 0 && len(t.witnesses) == 0:
		return nil, usageErrorf("--quorum needs --witness keys")
	case t.policy != "":
		b, err := os.ReadFile(t.policy)
		if err != nil {
			return nil, usageErrorf("--policy: %v", err)
		}
		p, err := checkpoint.ParsePolicy(b)
		if err != nil {
			return nil, usageErrorf("--policy %s: %v", t.policy, err)
		}
		tr.opts.Policy, tr.policyText = p, string(b)
	case len(t.witnesses) > 0:
		var ws []*checkpoint.CosignatureVerifier
		for _, k := range t.witnesses {
			vk, err := keyArg("witness", k)
			if err != nil {
				return nil, err
			}
			w, err := checkpoint.NewCosignatureVerifier(vk)
			if err != nil {
				return nil, usageErrorf("--witness %q: %v", k, err)
			}
			ws = append(ws, w)
		}
		q := t.quorum
		if q == 0 {
			q = len(ws)
		}
		p, err := checkpoint.NewThresholdPolicy(q, ws...)
		if err != nil {
			return nil, usageErrorf("--witness/--quorum: %v", err)
		}
		txt, err := p.MarshalText()
		if err != nil {
			return nil, err
		}
		tr.opts.Policy, tr.policyText = p, string(txt)
	}
	logs, err := disclosure.MergeLogKeys(vkeys, tr.opts.Policy)
	if err != nil {
		return nil, usageErrorf("--log-key and --policy: %v", err)
	}
	tr.opts.Logs, tr.logKeys = logs, vkeys
	if len(tr.opts.Logs) == 0 && (tr.opts.Policy == nil || len(tr.opts.Policy.Logs()) == 0) {
		return nil, usageErrorf("give the log's key with --log-key (or a log line in --policy)")
	}
	allLogs := slices.Clone(vkeys)
	if tr.opts.Policy != nil {
		allLogs = append(allLogs, tr.opts.Policy.LogKeys()...)
	}
	for _, k := range t.disclosureKeys {
		vk, err := keyArg("disclosure-key", k)
		if err != nil {
			return nil, err
		}
		v, err := checkpoint.NewVerifier(vk)
		if err != nil {
			return nil, usageErrorf("--disclosure-key %q: %v", k, err)
		}
		if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
			return nil, usageErrorf("--disclosure-key %q is a witness (cosignature) key", k)
		}
		for _, l := range allLogs {
			if disclosure.SameKeyMaterial(vk, l) {
				return nil, usageErrorf("--disclosure-key %q is the log's key: a package's statement is signed with a disclosure key of its own (journal key --disclosure)", k)
			}
		}
		tr.opts.Disclosure = append(tr.opts.Disclosure, v)
	}
	return tr, nil
}

// logVerifiers is every log key: the flags' and the policy's.
func (tr *trust) logVerifiers() []note.Verifier {
	out := append([]note.Verifier{}, tr.opts.Logs...)
	if tr.opts.Policy != nil {
		out = append(out, tr.opts.Policy.Logs()...)
	}
	return out
}

// checkNote verifies a signed checkpoint note with the trusted keys.
func (tr *trust) checkNote(n []byte) *disclosure.NoteCheck {
	return disclosure.CheckNote(n, tr.opts)
}

// noteCode maps a note check to an exit code.
func noteCode(nc *disclosure.NoteCheck) int {
	switch nc.Verdict() {
	case disclosure.NotSound:
		return exitNotSound
	case disclosure.Unverifiable:
		return exitUnverifiable
	}
	return exitSound
}

// describeNote is one paragraph on what a note check established.
func describeNote(nc *disclosure.NoteCheck) string {
	var b strings.Builder
	cr := nc.Report
	fmt.Fprintf(&b, "  checkpoint  %s  size %d  root %s\n", cr.Origin, cr.Size, cr.Root)
	fmt.Fprintf(&b, "  log signature  %s\n", yesNo(cr.LogSigned, "verified", "NOT verified"))
	if len(cr.Witnesses) > 0 || cr.QuorumMet {
		n := 0
		for _, w := range cr.Witnesses {
			if w.Cosigned {
				n++
			}
		}
		fmt.Fprintf(&b, "  witnesses      %d of %d cosigned, quorum %s\n", n, len(cr.Witnesses), yesNo(cr.QuorumMet, "met", "NOT met"))
		for _, w := range cr.Witnesses {
			switch {
			case w.Invalid:
				fmt.Fprintf(&b, "    %-24s INVALID signature\n", w.Name)
			case w.Cosigned:
				fmt.Fprintf(&b, "    %-24s cosigned at %s (its clock)\n", w.Name, w.Time.UTC().Format("2006-01-02T15:04:05Z"))
			default:
				fmt.Fprintf(&b, "    %-24s no cosignature\n", w.Name)
			}
		}
	}
	return b.String()
}

func yesNo(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
