package checkpointer

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

type queue chan uint64

func (q queue) Enqueue(_ context.Context, size uint64) error { q <- size; return nil }

func seal(t *testing.T, st *sqlite.Store) {
	t.Helper()
	ctx := context.Background()
	run := store.NewRunID()
	l, err := st.Acquire(ctx, run, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, l.Epoch, []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(ctx, run, l.Epoch, "succeeded"); err != nil {
		t.Fatal(err)
	}
}

// TestSigner signs nothing for an empty log, signs and queues each new
// size once (a size signed before comes back as kept), and, running, signs
// after Every seals without waiting for the interval.
func TestSigner(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "j.db"), sqlite.Options{Origin: "example.com/log"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	skey, _, err := checkpoint.GenerateLogKey(rand.Reader, st.Origin())
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := checkpoint.SignerForOrigin(skey, st.Origin())
	if err != nil {
		t.Fatal(err)
	}
	q := make(queue, 16)
	s := New(Config{Store: st, Signer: signer, Queue: q, Interval: time.Hour, Every: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if sc, err := s.SignNow(ctx); err != nil || sc != nil {
		t.Fatalf("empty log: %v %v", sc, err)
	}
	seal(t, st)
	first, err := s.SignNow(ctx)
	if err != nil || first == nil || first.Size != 1 || <-q != 1 {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := s.SignNow(ctx)
	if err != nil || !bytes.Equal(again.Note, first.Note) {
		t.Fatalf("a size signed twice: %v", err)
	}
	<-q
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(runCtx); close(done) }()
	if n := <-q; n != 1 { // Run signs at once
		t.Fatalf("first run sign: size %d", n)
	}
	seal(t, st)
	s.Sealed()
	seal(t, st)
	s.Sealed()
	if n := <-q; n != 3 {
		t.Fatalf("after two seals: size %d, want 3", n)
	}
	cancel()
	<-done
}
