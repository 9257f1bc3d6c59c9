package faults

import (
	"context"
	"math/rand/v2"
	"regexp"
	"sync"
	"testing"
	"time"
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
		t.Logf("round %d: %d records and %d seals acknowledged, %d checkpoints kept", round, got.records(), got.seals(), len(kept))
	}

	// Publication resumes by itself: the newest signed checkpoint is
	// witnessed without anything new being signed.
	srv := serve(t, db, token, publishing(policy)...)
	want, err := srv.client.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size := sizeOf(t, body(want))
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
