package audit

import (
	"errors"
	"fmt"
	"slices"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/disclosure"
)

// The fields keys are given with: auditor verify's flag names, which the
// verify page uses as its fields' names too.
const (
	FieldLogKey        = "log-key"
	FieldWitness       = "witness"
	FieldQuorum        = "quorum"
	FieldPolicy        = "policy"
	FieldDisclosureKey = "disclosure-key"
)

// ErrKeys is matched by every *KeyError: the keys or policy given cannot be
// used, so nothing was verified (auditor verify's usage error, exit 2).
var ErrKeys = errors.New("unusable keys")

// KeyError reports a key, a policy, or a combination of them that cannot be
// used. It names the field (a Field constant) and, when one key is at
// fault, which: Index into that field's list and the Key as given.
type KeyError struct {
	Field string
	Index int    // the key's position in its field; -1 when no one key is at fault
	Key   string // the key as given; "" when no one key is at fault
	Err   error
}

// Error reads like the auditor's usage errors: `--log-key "k...": reason`.
func (e *KeyError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("--%s %q: %v", e.Field, prefix(e.Key), e.Err)
	}
	return fmt.Sprintf("--%s: %v", e.Field, e.Err)
}

// Unwrap returns ErrKeys and the cause, so that errors.Is matches both the
// class and, say, disclosure.ErrKeyConflict.
func (e *KeyError) Unwrap() []error { return []error{ErrKeys, e.Err} }

// Keys are the keys and witness policy an auditor trusts, in their text
// form: what the auditor's flags carry and what the verify page's fields
// hold. Witnesses with Quorum and Policy are alternatives.
type Keys struct {
	// Logs are the log's note verifier keys ("<origin>+<id>+<base64>"),
	// more than one for a rotated key.
	Logs []string
	// Witnesses are cosignature/v1 verifier keys, of which Quorum (all of
	// them when 0) must have cosigned.
	Witnesses []string
	Quorum    int
	// Policy is a C2SP tlog-policy file's content; nil for none.
	// PolicyName names it in messages (a file name).
	Policy     []byte
	PolicyName string
	// Disclosure are the journal's disclosure verifier keys, never a log
	// key (spec/disclosure.md 2.7).
	Disclosure []string
}

// Trust is what Keys resolve to.
type Trust struct {
	// Options carries Logs, Policy and Disclosure for disclosure.Verify
	// and disclosure.CheckNote.
	Options disclosure.Options
	// LogKeys and PolicyText are the keys and policy as given (the
	// threshold policy Witnesses and Quorum make, written out), kept for
	// evidence files whose reader must check them with the same keys.
	LogKeys    []string
	PolicyText string
}

// Trust resolves the keys. It refuses, with a *KeyError, anything that
// would make a verdict mean less than it says: a malformed key, a witness
// key given as a log or disclosure key, a policy and witness keys both, a
// quorum without witnesses, no log key at all, two different log keys with
// one name (disclosure.MergeLogKeys), two different disclosure keys with
// one name (disclosure.MergeDisclosureKeys; the same key twice is one key),
// and a disclosure key that is a log key or a witness's key under any name.
func (k Keys) Trust() (*Trust, error) {
	tr := &Trust{}
	var vkeys []string
	for i, vk := range k.Logs {
		v, err := checkpoint.NewVerifier(vk)
		if err != nil {
			return nil, &KeyError{Field: FieldLogKey, Index: i, Key: vk, Err: err}
		}
		if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
			return nil, &KeyError{Field: FieldLogKey, Index: i, Key: vk, Err: fmt.Errorf("%w: a witness (cosignature) key; give it with --witness", disclosure.ErrKeyConflict)}
		}
		vkeys = append(vkeys, vk)
	}
	switch {
	case k.Policy != nil && (len(k.Witnesses) > 0 || k.Quorum != 0):
		return nil, &KeyError{Field: FieldPolicy, Index: -1, Err: errors.New("give either --policy or --witness/--quorum, not both")}
	case k.Quorum != 0 && len(k.Witnesses) == 0:
		return nil, &KeyError{Field: FieldQuorum, Index: -1, Err: errors.New("--quorum needs --witness keys")}
	case k.Policy != nil:
		p, err := checkpoint.ParsePolicy(k.Policy)
		if err != nil {
			if k.PolicyName != "" {
				err = fmt.Errorf("%s: %w", k.PolicyName, err)
			}
			return nil, &KeyError{Field: FieldPolicy, Index: -1, Err: err}
		}
		tr.Options.Policy, tr.PolicyText = p, string(k.Policy)
	case len(k.Witnesses) > 0:
		var ws []*checkpoint.CosignatureVerifier
		for i, vk := range k.Witnesses {
			w, err := checkpoint.NewCosignatureVerifier(vk)
			if err != nil {
				return nil, &KeyError{Field: FieldWitness, Index: i, Key: vk, Err: err}
			}
			ws = append(ws, w)
		}
		q := k.Quorum
		if q == 0 {
			q = len(ws)
		}
		p, err := checkpoint.NewThresholdPolicy(q, ws...)
		if err != nil {
			return nil, &KeyError{Field: FieldQuorum, Index: -1, Err: err}
		}
		txt, err := p.MarshalText()
		if err != nil {
			return nil, &KeyError{Field: FieldWitness, Index: -1, Err: err}
		}
		tr.Options.Policy, tr.PolicyText = p, string(txt)
	}
	logs, err := disclosure.MergeLogKeys(vkeys, tr.Options.Policy)
	if err != nil {
		return nil, &KeyError{Field: FieldLogKey, Index: -1, Err: fmt.Errorf("with the policy's log keys: %w", err)}
	}
	tr.Options.Logs, tr.LogKeys = logs, vkeys
	if len(tr.Options.Logs) == 0 && (tr.Options.Policy == nil || len(tr.Options.Policy.Logs()) == 0) {
		return nil, &KeyError{Field: FieldLogKey, Index: -1, Err: errors.New("none given: give the log's key with --log-key (or a log line in --policy)")}
	}
	allLogs := slices.Clone(vkeys)
	if tr.Options.Policy != nil {
		allLogs = append(allLogs, tr.Options.Policy.LogKeys()...)
	}
	others := slices.Clone(allLogs)
	if tr.Options.Policy != nil {
		for _, w := range tr.Options.Policy.Witnesses() {
			others = append(others, w.Verifier.String())
		}
	}
	for i, vk := range k.Disclosure {
		v, err := checkpoint.NewVerifier(vk)
		if err != nil {
			return nil, &KeyError{Field: FieldDisclosureKey, Index: i, Key: vk, Err: err}
		}
		if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
			return nil, &KeyError{Field: FieldDisclosureKey, Index: i, Key: vk, Err: fmt.Errorf("%w: a witness (cosignature) key", disclosure.ErrKeyConflict)}
		}
		for j, o := range others {
			if !disclosure.SameKeyMaterial(vk, o) {
				continue
			}
			whose := "the log's key; a package's statement is signed with a disclosure key of its own (journal key --disclosure)"
			if j >= len(allLogs) {
				whose = "a witness's public key; a package's statement is signed with the journal's disclosure key, which is no witness's (journal key --disclosure)"
			}
			return nil, &KeyError{Field: FieldDisclosureKey, Index: i, Key: vk, Err: fmt.Errorf("%w: %s", disclosure.ErrKeyConflict, whose)}
		}
	}
	ds, err := disclosure.MergeDisclosureKeys(k.Disclosure)
	if err != nil {
		return nil, &KeyError{Field: FieldDisclosureKey, Index: -1, Err: err}
	}
	tr.Options.Disclosure = ds
	return tr, nil
}

// prefix quotes at most a short prefix of outside input in messages.
func prefix(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
