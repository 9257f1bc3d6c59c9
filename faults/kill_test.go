package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/checkpointer"
	"github.com/runseal/runseal/publish"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// publishing are serve's flags for a log signed after every seal and
// published at once, retried fast.
func publishing(policy string) []string {
	return []string{"--policy", policy, "--checkpoint-every", "1", "--checkpoint-interval", "50ms",
		"--retry-min", "20ms", "--retry-max", "200ms", "--publish-poll", "50ms"}
}

// load runs n writers against srv, each sealing run after run, until one
// fails (serve died); watch polls its checkpoint meanwhile. stop ends it.
func load(t *testing.T, srv *served, n int, got acks, w *watcher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				if runOnce(ctx, srv.client, got, 1, 2, 64) != nil {
					return
				}
			}
		})
	}
	wg.Go(func() { w.poll(t, srv.client, done) })
	return func() { cancel(); close(done); wg.Wait() }
}

var cosignedRE = regexp.MustCompile(`publisher: cosigned`)

// TestFault_ServeKilledWhileSigningAndPublishing SIGKILLs a serve that
// signs a checkpoint after every seal and publishes each to a real
// witness, round after round: on even rounds right as a cosignature is
// kept (the publisher between its witness's answer and marking the
// checkpoint witnessed, with the next signing and publication under way),
// on odd rounds at a random moment while seals keep the signer busy.
// After every kill: every acknowledged write is there, every kept
// checkpoint is of the log as it stands, no size was ever served with two
// different checkpoints nor did the served size go back, and the witness
// holds a checkpoint the journal keeps byte for byte. At the end a
// restarted serve publishes what was left and the log verifies.
func TestFault_ServeKilledWhileSigningAndPublishing(t *testing.T) {
	campaign(t)
	const origin = "example.com/faults/kill"
	db, token, logKey := newSignedJournal(t, origin)
	wit := newWitness(t, "w1.example", origin, logKey)
	policy := writePolicy(t, logKey, wit)
	got, seen := newAcks(), newWatcher()
	ctx := context.Background()

	for round := range 8 {
		srv := serve(t, db, token, publishing(policy)...)
		stop := load(t, srv, 4, got, seen)
		if round%2 == 0 {
			// The k-th cosignature kept since this start.
			k := 1 + rand.IntN(4)
			at := 0
			for range k {
				var ok bool
				if _, at, ok = srv.wait(cosignedRE, at, 60*time.Second); !ok {
					t.Fatalf("round %d: nothing was cosigned:\n%s", round, tail(srv.lines(), 30))
				}
				at++
			}
		} else {
			before := got.seals()
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if got.seals() > before {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: no seal acknowledged", round)
				}
			}
			time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		}
		srv.kill()
		stop()

		kept := checkSQLite(t, db, got, seen, origin, wit)
		t.Logf("round %d: %d records and %d seals acknowledged, %d checkpoints kept; killed with %s", round, got.records(), got.seals(), len(kept), landed(t, db, wit))
	}

	// The kills above hit the window between keeping a signed checkpoint
	// and queuing it for the witnesses in some runs only: leave the
	// journal as such a kill would, a newer checkpoint signed and kept by
	// the log's key and never queued.
	size := signUnqueued(t, db)
	// Publication resumes by itself: that checkpoint is witnessed.
	srv := serve(t, db, token, publishing(policy)...)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := srv.client.Witnessed(ctx)
		if err == nil && sizeOf(t, body(n)) >= size {
			seen.see(t, n)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("size %d was never witnessed after the restart (%v):\n%s", size, err, tail(srv.lines(), 30))
		}
	}
	srv.kill()
	checkSQLite(t, db, got, seen, origin, wit)
	verifyAll(t, db)
}

// landed says where in signing and publication a kill left the journal at
// db: seals not yet signed, the newest signed checkpoint not yet queued for
// the witness, queued but not cosigned, cosigned but not marked witnessed,
// or all done.
func landed(t *testing.T, db string, wit *realWitness) string {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := checkpoint.NewCosignatureVerifier(wit.vkey)
	if err != nil {
		t.Fatal(err)
	}
	id := publish.WitnessID(v)
	cur, err1 := s.Checkpoint(ctx)
	latest, err2 := s.LatestCheckpoint(ctx)
	cosigned, _, err3 := s.LastCosigned(ctx, id)
	pending, err4 := s.NextPublication(ctx, id)
	witnessed, err5 := s.LatestWitnessed(ctx)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		t.Fatal(err)
	}
	var signed uint64
	if latest != nil {
		signed = latest.Size
	}
	var parts []string
	if cur.Size > signed {
		parts = append(parts, fmt.Sprintf("%d seals not yet signed", cur.Size-signed))
	}
	switch {
	case signed == 0:
	case witnessed != nil && witnessed.Size >= signed:
		parts = append(parts, fmt.Sprintf("size %d signed and witnessed", signed))
	case cosigned >= signed:
		parts = append(parts, fmt.Sprintf("size %d cosigned but not yet marked witnessed", signed))
	case pending != nil && pending.Size >= signed:
		parts = append(parts, fmt.Sprintf("size %d queued, not yet cosigned", signed))
	default:
		parts = append(parts, fmt.Sprintf("size %d signed and kept but not yet queued", signed))
	}
	return strings.Join(parts, ", ")
}

// signUnqueued seals one more run in the SQLite journal at db and signs and
// keeps its checkpoint with the journal's key (db + ".key") as serve's
// signer does, without queuing it for publication: the state of a serve
// killed right after signing. It returns the size signed.
func signUnqueued(t *testing.T, db string) uint64 {
	t.Helper()
	ctx := context.Background()
	skey, err := os.ReadFile(db + ".key")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoint.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := store.NewRunID()
	l, err := s.Acquire(ctx, run, "faults", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, l.Epoch, []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, run, l.Epoch, "succeeded"); err != nil {
		t.Fatal(err)
	}
	sc, err := checkpointer.SignAndKeep(ctx, s, signer)
	if err != nil {
		t.Fatal(err)
	}
	return sc.Size
}
