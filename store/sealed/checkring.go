package sealed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
)

// ErrScopesMissing matches *ScopesMissingError: the key ring lacks scopes
// the journal's records are sealed under.
var ErrScopesMissing = errors.New("key ring lacks the journal's scopes")

// ScopesMissingError names the scopes of a tenant's sealed records that a
// key ring has never held (neither a key nor an erasure's tombstone):
// every read that opens those records would fail. It comes from a wrong
// key ring, or an empty or stale copy of the right one.
type ScopesMissingError struct {
	Tenant string
	// Scopes are the missing scopes found, sorted, at most
	// MaxMissingListed of them; Missing counts them all.
	Scopes  []string
	Missing int
	// Runs is how many runs were looked at (the most recently written).
	Runs int
}

// MaxMissingListed bounds ScopesMissingError.Scopes.
const MaxMissingListed = 8

func (e *ScopesMissingError) Error() string {
	more := ""
	if e.Missing > len(e.Scopes) {
		more = fmt.Sprintf(" and %d more", e.Missing-len(e.Scopes))
	}
	return fmt.Sprintf("tenant %s: the key ring has never held %d scope(s) that the journal's sealed records use (%s%s, among the %d most recently written runs): is it the key ring this journal was sealed with?",
		e.Tenant, e.Missing, strings.Join(e.Scopes, ", "), more, e.Runs)
}

// Unwrap returns ErrScopesMissing, the error's class.
func (e *ScopesMissingError) Unwrap() error { return ErrScopesMissing }

// checkRecords is how many of a run's first records CheckRing reads, and
// within how many stored bytes (at least one record is read).
const (
	checkRecords = 16
	checkBytes   = 256 << 10
)

// CheckRing checks that the key ring holds the scopes this journal's
// records are sealed under, so that a server refuses to start with a ring
// that cannot open them rather than fail every read that would. It reads
// the first records of the runs most recently written, at most runs of
// them, and asks the ring to unwrap the data key of one sealed field per
// scope met (no field is decrypted): a scope the ring never had is
// missing (*ScopesMissingError naming them); an erased scope is held (its
// tombstone). A data key that does not unwrap is left to the read that
// meets it (a damaged record, reported there as corrupt); a ring that
// cannot answer is an error.
func (j *Journal) CheckRing(ctx context.Context, runs int) error {
	recent, err := j.Journal.RecentRuns(ctx, nil, runs)
	if err != nil {
		return err
	}
	tenant := j.Journal.Tenant()
	checked := map[string]bool{}
	var missing []string
	for _, a := range recent {
		recs, _, err := j.Journal.ReadStored(ctx, a.Run, 1, checkRecords, checkBytes)
		if err != nil {
			return err
		}
		for _, r := range recs {
			scope := Scope(tenant, r.Case, r.Run)
			if checked[scope] {
				continue
			}
			env, ok, err := firstEnvelope(r)
			if err != nil || !ok {
				continue // no sealed field here, or one a read reports as corrupt
			}
			checked[scope] = true
			_, err = j.ring.Unwrap(ctx, scope, env.Wrapped)
			switch {
			case err == nil, errors.Is(err, keyring.ErrErased), errors.Is(err, keyring.ErrUnwrap):
			case errors.Is(err, keyring.ErrUnknownScope):
				missing = append(missing, scope)
			default:
				return fmt.Errorf("sealed: check the key ring: %w", err)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return &ScopesMissingError{Tenant: tenant, Scopes: missing[:min(len(missing), MaxMissingListed)], Missing: len(missing), Runs: len(recent)}
}

// firstEnvelope returns the envelope of r's first sealed field, if any.
func firstEnvelope(r store.Record) (Envelope, bool, error) {
	b, err := store.DecodeBody(r.Raw)
	if err != nil {
		return Envelope{}, false, err
	}
	v, err := canon.Parse(b.Fields)
	if err != nil {
		return Envelope{}, false, err
	}
	for _, m := range v.Members {
		if Seals(b.Kind, m.Key) && m.Value.Kind == canon.String && IsEnvelope(m.Value.Str) {
			env, err := ParseEnvelope(m.Value.Str)
			return env, err == nil, err
		}
	}
	return Envelope{}, false, nil
}
