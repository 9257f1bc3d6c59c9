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
	seen := keySet{}
	if policy != nil {
		for _, k := range policy.LogKeys() {
			if _, err := seen.add("log", k); err != nil {
				return nil, err
			}
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
		if fresh, err := seen.add("log", k); err != nil || !fresh {
			if err != nil {
				return nil, err
			}
			continue // the same key, given twice: one key
		}
		out = append(out, v)
	}
	return out, nil
}

// MergeDisclosureKeys returns the verifiers for the disclosure keys vkeys,
// each key once: the same key given twice is one key, as a log key is
// (spec/disclosure.md section 4), since a verifier that held it twice
// could not tell which of two equal keys a signature line names. Two
// different keys with one name and key ID are a *KeyConflictError (the
// caller's mistake, a usage error, never a finding about a package), as
// is a witness key; a malformed key is an error naming it.
func MergeDisclosureKeys(vkeys []string) ([]note.Verifier, error) {
	seen := keySet{}
	var out []note.Verifier
	for _, k := range vkeys {
		v, err := checkpoint.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("disclosure key %q: %w", prefix(k), err)
		}
		if _, ok := v.(*checkpoint.CosignatureVerifier); ok {
			return nil, &KeyConflictError{Detail: fmt.Sprintf("%s+%08x is a witness (cosignature) key, given as a disclosure key", v.Name(), v.KeyHash())}
		}
		fresh, err := seen.add("disclosure", k)
		if err != nil {
			return nil, err
		}
		if fresh {
			out = append(out, v)
		}
	}
	return out, nil
}

// keySet holds verifier keys by name and key ID: what a signature line
// names. One key given twice is held once; two different public keys under
// one name and key ID cannot both be meant.
type keySet map[[2]string][]byte

// add adds vkey (a key of the kind named in messages) and reports whether
// it was new; the same name and key ID over another key is a
// *KeyConflictError.
func (s keySet) add(kind, vkey string) (bool, error) {
	n, h, key, err := splitVKey(vkey)
	if err != nil {
		return false, err
	}
	id := [2]string{n, h}
	if prev, ok := s[id]; ok {
		if !bytes.Equal(prev, key) {
			return false, &KeyConflictError{Detail: fmt.Sprintf("two different %s keys are named %s+%s", kind, n, h)}
		}
		return false, nil
	}
	s[id] = key
	return true, nil
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
