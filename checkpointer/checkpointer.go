// Package checkpointer signs a journal's checkpoints as its log grows: on
// an interval, after a number of seals, and on demand, keeping each signed
// note in the store and handing its size to whatever publishes it to
// witnesses.
//
// Signing is serialised per Signer, and a size already signed is never
// signed again: the store keeps the first note of each size, and SignNow
// returns that one.
package checkpointer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
)

// Store is what a Signer needs of the journal: its current checkpoint and
// the signed checkpoints it keeps.
type Store interface {
	Checkpoint(ctx context.Context) (store.Checkpoint, error)
	SignedCheckpointAt(ctx context.Context, size uint64) (*store.SignedCheckpoint, error)
	SaveCheckpoint(ctx context.Context, sc store.SignedCheckpoint) (store.SignedCheckpoint, error)
}

// Queue takes each newly signed size for publication to witnesses (a
// witness publisher's Enqueue).
type Queue interface {
	Enqueue(ctx context.Context, size uint64) error
}

// Config is what a Signer is made from.
type Config struct {
	Store  Store
	Signer note.Signer // the log's key
	// Queue, when not nil, receives every size signed.
	Queue Queue
	// Interval is how often Run signs; a minute when zero.
	Interval time.Duration
	// Every is how many seals (reported with Sealed) make Run sign before
	// the interval ends; 100 when zero.
	Every  int
	Logger *slog.Logger
}

// Signer signs one log's checkpoints. It is safe for concurrent use.
type Signer struct {
	cfg    Config
	mu     sync.Mutex
	sealed chan struct{}
}

// New returns a Signer; Run starts its periodic signing.
func New(cfg Config) *Signer {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Every < 1 {
		cfg.Every = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Signer{cfg: cfg, sealed: make(chan struct{}, 1024)}
}

// Sealed tells the signer a run was sealed. It never blocks: when the
// signer is busy the seal is not counted, and the interval catches it.
func (s *Signer) Sealed() {
	select {
	case s.sealed <- struct{}{}:
	default:
	}
}

// SignNow signs and keeps the current checkpoint and queues it for the
// witnesses; nil for an empty log, which no one needs witnessed.
func (s *Signer) SignNow(ctx context.Context) (*store.SignedCheckpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.cfg.Store.Checkpoint(ctx)
	if err != nil || cur.Size == 0 {
		return nil, err
	}
	sc, err := SignAndKeep(ctx, s.cfg.Store, s.cfg.Signer)
	if err != nil {
		return nil, err
	}
	if s.cfg.Queue != nil {
		if err := s.cfg.Queue.Enqueue(ctx, sc.Size); err != nil {
			return nil, fmt.Errorf("queue checkpoint %d for the witnesses: %w", sc.Size, err)
		}
	}
	return &sc, nil
}

// Run signs at once, then on every interval and after every Every seals,
// until ctx ends. Failures are logged, and the next tick tries again.
func (s *Signer) Run(ctx context.Context) {
	sign := func() {
		if _, err := s.SignNow(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Error("serve: signing a checkpoint", "err", err)
		}
	}
	sign()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	seals := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			seals = 0
			sign()
		case <-s.sealed:
			if seals++; seals >= s.cfg.Every {
				seals = 0
				sign()
			}
		}
	}
}

// SignAndKeep signs the store's current checkpoint and keeps it, returning
// what the store kept: the first note of that size, which is returned as is
// when the size was signed before.
func SignAndKeep(ctx context.Context, s Store, signer note.Signer) (store.SignedCheckpoint, error) {
	cur, err := s.Checkpoint(ctx)
	if err != nil {
		return store.SignedCheckpoint{}, err
	}
	if kept, err := s.SignedCheckpointAt(ctx, cur.Size); err != nil || kept != nil {
		if kept != nil {
			return *kept, nil
		}
		return store.SignedCheckpoint{}, err
	}
	n, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: cur.Origin, Size: cur.Size, Root: cur.Root}, signer)
	if err != nil {
		return store.SignedCheckpoint{}, fmt.Errorf("sign checkpoint: %w", err)
	}
	return s.SaveCheckpoint(ctx, store.SignedCheckpoint{Size: cur.Size, Root: cur.Root, Note: n})
}
