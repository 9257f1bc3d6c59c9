package main

import (
	"os"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/audit"
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

// load resolves the flags with audit.Keys.Trust, the one place keys are
// resolved (the verify page uses it too). Anything malformed is a usage
// error: the auditor never starts checking with keys it could not read.
func (t *trustFlags) load() (*trust, error) {
	k := audit.Keys{Quorum: t.quorum}
	for _, f := range []struct {
		flag string
		args []string
		dst  *[]string
	}{
		{audit.FieldLogKey, t.logKeys, &k.Logs},
		{audit.FieldWitness, t.witnesses, &k.Witnesses},
		{audit.FieldDisclosureKey, t.disclosureKeys, &k.Disclosure},
	} {
		for _, a := range f.args {
			vk, err := keyArg(f.flag, a)
			if err != nil {
				return nil, err
			}
			*f.dst = append(*f.dst, vk)
		}
	}
	if t.policy != "" {
		b, err := os.ReadFile(t.policy)
		if err != nil {
			return nil, usageErrorf("--policy: %v", err)
		}
		k.Policy, k.PolicyName = b, t.policy
	}
	tr, err := k.Trust()
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return &trust{opts: tr.Options, logKeys: tr.LogKeys, policyText: tr.PolicyText}, nil
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
	audit.WriteNote(&b, nc)
	return b.String()
}
