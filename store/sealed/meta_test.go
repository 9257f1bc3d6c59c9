package sealed_test

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/storetest"
)

// zeros is a broken randomness source: every nonce is the same.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// sealsEffectKey is a sealing decorator that also "seals" the effect key
// (replaces it with a fresh, unlinkable digest), as a decorator turning
// records into opaque sealed variants would: it still compiles and still
// opens its payloads, and silently loses exactly-once.
type sealsEffectKey struct{ *sealed.Journal }

func (s sealsEffectKey) Append(ctx context.Context, epoch store.Epoch, batch []store.Append) ([]store.Record, error) {
	out := slices.Clone(batch)
	for i := range out {
		if out[i].EffectKey != nil {
			salt := make([]byte, 16)
			rand.Read(salt)
			k := store.Sum(append(salt, out[i].EffectKey[:]...))
			out[i].EffectKey = &k
		}
	}
	return s.Journal.Append(ctx, epoch, out)
}

func TestSealingChecksCatchBrokenDecorators(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(tb testing.TB) storetest.Sealing
		check string // a check that must report it
	}{
		{"seals effect_key", func(tb testing.TB) storetest.Sealing {
			s, _ := openSQLite(tb)
			ring := openRing(tb)
			j := sealed.New(s, ring, sealed.Options{})
			h := sealingOf(j, ring)
			h.Journal = sealsEffectKey{j}
			return h
		}, "exactly-once/under-sealing"},
		{"seals effect_key (routing)", func(tb testing.TB) storetest.Sealing {
			s, _ := openSQLite(tb)
			ring := openRing(tb)
			j := sealed.New(s, ring, sealed.Options{})
			h := sealingOf(j, ring)
			h.Journal = sealsEffectKey{j}
			return h
		}, "sealing/routing-and-index-fields-clear"},
		{"reuses a nonce", func(tb testing.TB) storetest.Sealing {
			s, _ := openSQLite(tb)
			ring := openRing(tb)
			return sealingOf(sealed.New(s, ring, sealed.Options{Rand: zeros{}}), ring)
		}, "sealing/fresh-nonces"},
		{"omits the run from the associated data", func(tb testing.TB) storetest.Sealing {
			s, _ := openSQLite(tb)
			ring := openRing(tb)
			j := sealed.New(s, ring, sealed.Options{})
			sealed.OmitRunFromAD(j)
			return sealingOf(j, ring)
		}, "sealing/envelope-moved-is-corrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := storetest.CheckSealing(t, storetest.SealingHarness{Open: tc.build})
			caught := false
			for _, v := range r.Violations {
				if v.Check == tc.check {
					caught = true
					t.Logf("caught: %s", v)
				}
			}
			if !caught {
				t.Fatalf("a decorator that %s passed %s; violations: %v", tc.name, tc.check, r.Violations)
			}
		})
	}
}
