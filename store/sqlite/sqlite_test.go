package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/storetest"
)

func open(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tamper runs SQL against the file behind the store's back, as an attacker
// with file access would.
func tamper(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("tamper: %v", err)
	}
}

func note(run store.RunID, text string) store.Append {
	return store.Append{Run: run, Kind: "Note", Fields: []byte(`{"text":"` + text + `"}`)}
}

func TestTamperedRecordIsCorrupt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "a"), note(run, "b"), note(run, "c")}); err != nil {
		t.Fatal(err)
	}
	tamper(t, path, `UPDATE records SET raw = CAST(replace(CAST(raw AS TEXT), '"b"', '"B"') AS BLOB) WHERE seq = 2`)
	var c *store.CorruptError
	if _, err := s.Read(ctx, run, 1); !errors.As(err, &c) || c.Seq != 2 {
		t.Fatalf("Read of tampered run: %v", err)
	}
	if _, err := s.Verify(ctx, run); !errors.As(err, &c) || c.Seq != 2 {
		t.Fatalf("Verify of tampered run: %v", err)
	}
}

func TestDeletedRecordIsCorrupt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "a"), note(run, "b"), note(run, "c")}); err != nil {
		t.Fatal(err)
	}
	tamper(t, path, `DELETE FROM records WHERE seq = 3`)
	var c *store.CorruptError
	if _, err := s.Verify(ctx, run); !errors.As(err, &c) {
		t.Fatalf("Verify of truncated run: %v", err)
	}
	tamper(t, path, `DELETE FROM records WHERE seq = 2`)
	if _, err := s.Read(ctx, run, 1); !errors.As(err, &c) {
		t.Fatalf("Read across a gap: %v", err)
	}
}

func TestUnparseableStoredIDIsCorrupt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"quarantined"}`)}}); err != nil {
		t.Fatal(err)
	}
	tamper(t, path, `UPDATE runs SET run = 'not-a-ulid'`)
	var c *store.CorruptError
	for name, call := range map[string]func() error{
		"RunsByOutcome": func() error { _, err := s.RunsByOutcome(ctx, "quarantined", 10); return err },
		"RecentRuns":    func() error { _, err := s.RecentRuns(ctx, nil, 10); return err },
		"RunsByID":      func() error { _, err := s.RunsByID(ctx, nil, 10); return err },
	} {
		if err := call(); !errors.As(err, &c) {
			t.Errorf("%s with an unparseable stored id: %v, want CorruptError", name, err)
		}
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	a := open(t, path, Options{})
	b := open(t, path, Options{Tenant: "acme"})
	if b.Tenant() != "acme" || !strings.HasSuffix(b.Origin(), "/acme") || a.Origin()+"/acme" != b.Origin() {
		t.Fatalf("origins %q and %q", a.Origin(), b.Origin())
	}
	ra, rb := store.NewRunID(), store.NewRunID()
	adm := func(run store.RunID) store.Append {
		return store.Append{Run: run, Kind: store.KindRunAdmitted, Fields: []byte(`{"admission_key":"same-key"}`)}
	}
	if _, err := a.Append(ctx, 1, []store.Append{adm(ra)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, 1, []store.Append{adm(rb)}); err != nil {
		t.Fatalf("the same admission key in another tenant is ordinary: %v", err)
	}
	if h, _ := b.Head(ctx, ra); h.Seq != 0 {
		t.Errorf("tenant acme sees the default tenant's run")
	}
	if got, _ := b.RunsByID(ctx, nil, 10); len(got) != 1 || got[0] != rb {
		t.Errorf("tenant acme lists %v", got)
	}
}

func TestOriginFixedAtCreation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{Origin: "example.com/log"})
	s.Close()
	if _, err := Open(context.Background(), path, Options{Origin: "example.com/other"}); err == nil {
		t.Fatal("origin changed on reopen")
	}
	s2 := open(t, path, Options{})
	if s2.Origin() != "example.com/log" {
		t.Fatalf("origin %q after reopen", s2.Origin())
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), Options{Origin: "has space"}); err == nil {
		t.Fatal("origin with a space accepted")
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	open(t, path, Options{}).Close()
	tamper(t, path, `UPDATE meta SET value='99' WHERE key='schema'`)
	_, err := Open(context.Background(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestDurableAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	run := store.NewRunID()
	recs, err := s.Append(ctx, 1, []store.Append{note(run, "a")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "b")}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	s2 := open(t, path, Options{})
	d, err := s2.Verify(ctx, run)
	if err != nil || d != recs[0].Hash {
		t.Fatalf("after reopen: %v %v", d, err)
	}
}

func TestCancelledContextWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	run := store.NewRunID()
	if _, err := s.Append(ctx, 1, []store.Append{note(run, "a")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with cancelled ctx: %v", err)
	}
	if h, _ := s.Head(context.Background(), run); h.Seq != 0 {
		t.Fatal("cancelled append wrote")
	}
}

func TestConformanceGroupOfOne(t *testing.T) {
	// The suite again with group commit disabled (one write per
	// transaction), so both extremes of group size are held to the contract.
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		clk := storetest.NewFakeClock()
		s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "j.db"), Options{Now: clk.Now, MaxGroup: 1})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s, clk
	}})
}

// TestSchemaOneUpgrades: a file written by schema 1 (before publications
// and tokens) opens, gains the new tables, and keeps its data.
func TestSchemaOneUpgrades(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := open(t, path, Options{})
	run := store.NewRunID()
	if _, err := s.Append(context.Background(), 1, []store.Append{note(run, "kept")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tamper(t, path, `DROP TABLE publications; DROP TABLE cosignatures; DROP TABLE witness_state; DROP TABLE witnessed; DROP TABLE tokens;
		UPDATE meta SET value='1' WHERE key='schema'`)
	s = open(t, path, Options{})
	if h, err := s.Head(context.Background(), run); err != nil || h.Seq != 1 {
		t.Fatalf("head after upgrade: %+v, %v", h, err)
	}
	if toks, err := s.Tokens(context.Background()); err != nil || len(toks) != 0 {
		t.Fatalf("tokens after upgrade: %v, %v", toks, err)
	}
	if p, err := s.NextPublication(context.Background(), "w"); err != nil || p != nil {
		t.Fatalf("publications after upgrade: %v, %v", p, err)
	}
}

// TestConformanceOneByOne runs the contract with every append written alone
// in its savepoint (the path a failed batch falls back to), so both ways an
// append is written are held to it.
func TestConformanceOneByOne(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(tb testing.TB) (store.Journal, storetest.Clock) {
		clk := storetest.NewFakeClock()
		s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "j.db"), Options{Now: clk.Now, oneByOne: true})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s, clk
	}})
}
