package disclosure

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
)

// ErrKeyConflict is matched by a *KeyConflictError.
var ErrKeyConflict = errors.New("conflicting keys")

// KeyConflictError reports two keys given to one check that cannot both be
// meant: the same name and key ID over different public keys, a witness
// key given as a log key, or a disclosure key that is also a log key. It
// is the caller's mistake (a usage error), not a finding about a package.
type KeyConflictError struct {
	Detail string
}

func (e *KeyConflictError) Error() string { return "keys: " + e.Detail }

// Unwrap returns ErrKeyConflict.
func (e *KeyConflictError) Unwrap() error { return ErrKeyConflict }

// MergeLogKeys returns the log verifiers for vkeys (keys given out of band,
// such as --log-key) that policy's log lines do not already hold. A key
// given both ways is one key, as spec/checkpoint.md section 6.3 takes keys
// from a policy and out of band alike: an operator who hands over a policy
// and the log key it names has made no mistake. Two keys with one name and
// key ID but different public keys are a *KeyConflictError, as is a
// witness key given as a log key; a malformed key is an error naming it.
// This is the one place both the auditor and journal disclose merge keys.
func MergeLogKeys(vkeys []string, policy *checkpoint.Policy) ([]note.Verifier, error) {
	type known struct{ name, hash string }
	seen := map[known][]byte{}
	if policy != nil {
		for _, k := range policy.LogKeys() {
			n, h, key, err := splitVKey(k)
			if err != nil {
				return nil, err
			}
			seen[known{n, h}] = key
		}
	}
	var out []note.Verifier
	for _, k := range vkeys {
		v, err := checkpoint.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("log key %q: %w", prefix(k), err)
		}
		if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
			return nil, &KeyConflictError{Detail: fmt.Sprintf("%s+%08x is a witness (cosignature) key, given as a log key", v.Name(), v.KeyHash())}
		}
		n, h, key, err := splitVKey(k)
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[known{n, h}]; ok {
			if !bytes.Equal(prev, key) {
				return nil, &KeyConflictError{Detail: fmt.Sprintf("two different log keys are named %s+%s", n, h)}
			}
			continue // the same key, given twice: one key
		}
		seen[known{n, h}] = key
		out = append(out, v)
	}
	return out, nil
}

// SameKeyMaterial reports whether two verifier keys carry the same public
// key, whatever their names: key separation refuses a disclosure key that
// is a log key under another name.
func SameKeyMaterial(a, b string) bool {
	_, _, ka, errA := splitVKey(a)
	_, _, kb, errB := splitVKey(b)
	return errA == nil && errB == nil && len(ka) > 1 && len(kb) > 1 && bytes.Equal(ka[1:], kb[1:])
}

// splitVKey splits a verifier key "name+hash+base64(type||key)".
func splitVKey(vkey string) (name, hash string, key []byte, err error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return "", "", nil, fmt.Errorf("verifier key %q is not name+hash+key", prefix(vkey))
	}
	key, err = base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(key) == 0 {
		return "", "", nil, fmt.Errorf("verifier key %q: the key is not base64", prefix(vkey))
	}
	return parts[0], strings.ToLower(parts[1]), key, nil
}

// prefix quotes at most a short prefix of outside input in messages.
func prefix(s string) string {
	if len(s) > 48 {
		return s[:48] + "..."
	}
	return s
}
