package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/runseal/runseal/store"
)

// TestForTenant_OneWriterForTheFile: tenants' views of one open file are
// isolated like separately opened handles, share its one writer (their
// concurrent appends all land, none refused for the write lock), and the
// file stays open until the last view closes.
func TestForTenant_OneWriterForTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	a, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.ForTenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	if b.Tenant() != "acme" || b.Origin() != a.Origin()+"/acme" || b.file != a.file {
		t.Fatalf("view: tenant %q origin %q", b.Tenant(), b.Origin())
	}
	if _, err := a.ForTenant("bad tenant/"); err == nil {
		t.Fatal("an invalid tenant name was accepted")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			run := store.NewRunID()
			if _, err := s.Append(ctx, 1, []store.Append{note(run, "x")}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append through a shared writer: %v", err)
	}
	ra, _ := a.RunsByID(ctx, nil, 100)
	rb, _ := b.RunsByID(ctx, nil, 100)
	if len(ra) != 32 || len(rb) != 32 {
		t.Fatalf("default sees %d runs, acme %d; want 32 each", len(ra), len(rb))
	}
	// Closing one view leaves the other working; closing it twice changes
	// nothing; the last close closes the file.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := b.Append(ctx, 1, []store.Append{note(store.NewRunID(), "y")}); err != nil {
		t.Fatalf("the acme view after the default one closed: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, 1, []store.Append{note(store.NewRunID(), "z")}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("append after the last close: %v", err)
	}
	if _, err := b.ForTenant("other"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("a view of a closed file: %v", err)
	}
}

// BenchmarkTokenByID is the lookup every API request makes.
func BenchmarkTokenByID(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "j.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateToken(ctx, store.Token{ID: "0123456789abcdef", Tenant: "default", Role: store.RoleWriter}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if t, err := s.TokenByID(ctx, "0123456789abcdef"); err != nil || t == nil {
				b.Fatal(err)
			}
		}
	})
}
