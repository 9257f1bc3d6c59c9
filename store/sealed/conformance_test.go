package sealed_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/runseal/runseal/keyring"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/store/storetest"
)

func openSQLite(tb testing.TB) (*sqlite.Store, *storetest.FakeClock) {
	tb.Helper()
	clk := storetest.NewFakeClock()
	s, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "journal.db"), sqlite.Options{Now: clk.Now})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, clk
}

func openRing(tb testing.TB) *keyring.File {
	tb.Helper()
	r, err := keyring.OpenFile(filepath.Join(tb.TempDir(), "keys"))
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestConformanceSQLite runs the whole store suite through the sealing
// decorator over SQLite: sealing must not cost any guarantee.
func TestConformanceSQLite(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		s, clk := openSQLite(tb)
		return sealed.New(s, openRing(tb), sealed.Options{}), clk
	}})
}

func sealingHarness(open func(tb testing.TB) store.Journal) storetest.SealingHarness {
	return storetest.SealingHarness{Open: func(tb testing.TB) storetest.Sealing {
		inner := open(tb)
		ring := openRing(tb)
		j := sealed.New(inner, ring, sealed.Options{})
		return sealingOf(j, ring)
	}}
}

func sealingOf(j *sealed.Journal, ring keyring.Ring) storetest.Sealing {
	return storetest.Sealing{
		Journal: j,
		Inner:   j.Inner(),
		Seals:   sealed.Seals,
		EraseCase: func(ctx context.Context, c store.CaseID) error {
			_, err := ring.Erase(ctx, sealed.CaseScope(j.Tenant(), c))
			return err
		},
		ErasedFields: func(ctx context.Context, r store.Record) ([]string, error) {
			fs, err := j.Fields(ctx, r)
			var out []string
			for _, f := range fs {
				if f.State == sealed.Erased {
					out = append(out, f.Name)
				}
			}
			return out, err
		},
		Nonce: func(v []byte) ([]byte, error) {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
			e, err := sealed.ParseEnvelope(s)
			return e.Nonce, err
		},
	}
}

func TestSealingSQLite(t *testing.T) {
	storetest.RunSealing(t, sealingHarness(func(tb testing.TB) store.Journal { s, _ := openSQLite(tb); return s }))
}

// A sealing journal over a backend is a backend: the commands take it.
var _ store.Backend = (*sealed.Journal)(nil)
