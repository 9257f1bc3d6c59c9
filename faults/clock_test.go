package faults

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/checkpointer"
	"github.com/runseal/runseal/internal/journaltest"
	"github.com/runseal/runseal/publish"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
	"github.com/runseal/runseal/witness"
)

// jumpClock is a wall clock that can be stepped, as NTP or an operator
// steps a machine's clock.
type jumpClock struct{ off atomic.Int64 }

func (c *jumpClock) Now() time.Time        { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *jumpClock) set(off time.Duration) { c.off.Store(int64(off)) }
func (c *jumpClock) offset() time.Duration { return time.Duration(c.off.Load()) }

// TestFault_ClockJumpsUnderSigningAndWitness runs the journal's signer and
// publisher (each clock a journal serve takes: the store's, which stamps
// signed_at, and the publisher's, which times retries) and a witness (its
// clock stamps cosignatures and refills its rate limit) in process, each
// on a clock that is stepped back and forth by an hour while runs are
// sealed and every seal is signed; once while the witness is unreachable,
// so that a retry is pending when the clock goes back. Must hold: the
// signed size never goes back and no size is signed twice; the witness
// cosigns every phase's newest checkpoint (it neither refuses forever nor
// leaves a retry an hour away); no two different checkpoints are cosigned
// for one size; each cosignature's timestamp is the witness's clock when
// it signed (spec/witness.md section 4); and the log verifies.
func TestFault_ClockJumpsUnderSigningAndWitness(t *testing.T) {
	campaign(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var jclk, wclk jumpClock
	db := filepath.Join(t.TempDir(), "j.db")
	j, err := sqlite.Open(ctx, db, sqlite.Options{Origin: "example.com/faults/clock", Now: jclk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	lg := journaltest.NewLog(t, j.Origin())
	wk := journaltest.NewWitness(t, "w.example")

	wst, err := witness.OpenStore(ctx, filepath.Join(t.TempDir(), "w.db"), witness.StoreOptions{Create: true, Now: wclk.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer wst.Close()
	if err := wst.AddLog(ctx, witness.LogConfig{Origin: lg.Origin, Keys: []string{lg.VKey}, QPD: witness.MaxQPD, Burst: witness.MaxQPD}); err != nil {
		t.Fatal(err)
	}
	w, err := witness.New(ctx, wst, []*checkpoint.Cosigner{wk.Cosigner}, witness.Options{Now: wclk.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := w.Handler("")
	if err != nil {
		t.Fatal(err)
	}
	var reachable atomic.Bool
	reachable.Store(true)
	hs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !reachable.Load() {
			http.Error(rw, "maintenance", http.StatusServiceUnavailable)
			return
		}
		wh.ServeHTTP(rw, r)
	}))
	defer hs.Close()
	wk.URL = hs.URL
	pol := journaltest.Policy(t, lg, wk)

	pub, err := publish.New(j, pol, lg.Verifier, publish.Options{Now: jclk.Now, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Poll: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	signer := checkpointer.New(checkpointer.Config{Store: j, Signer: lg.Signer, Queue: pub, Interval: 50 * time.Millisecond, Every: 1, Logger: quiet})
	var wg sync.WaitGroup
	wg.Go(func() { pub.Run(ctx) })
	wg.Go(func() { signer.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	// The signed size, watched as a client would.
	seen := newWatcher()
	seeLatest := func() {
		if sc, err := j.LatestCheckpoint(ctx); err == nil && sc != nil {
			seen.see(t, sc.Note)
		}
	}
	seal := func(n int) {
		for range n {
			r := store.NewRunID()
			if _, err := j.Append(ctx, 1, []store.Append{{Run: r, Kind: "Step", Fields: []byte(`{}`)}, {Run: r, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Seal(ctx, r, 1, "succeeded"); err != nil {
				t.Fatal(err)
			}
			signer.Sealed()
			seeLatest()
		}
	}
	// cosigned is every cosignature kept, by size, with the phase it
	// was made in.
	type cosig struct {
		at     time.Time
		lo, hi time.Time // the witness's clock around the phase
	}
	cosigned := map[uint64]cosig{}
	wid := publish.WitnessID(pol.Witnesses()[0].Verifier)
	witnessedAll := func(phase string, lo time.Time) {
		t.Helper()
		var want uint64
		until(t, phase+": the newest size is signed", 30*time.Second, func() bool {
			sc, err := signer.SignNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want = sc.Size
			return true
		})
		until(t, fmt.Sprintf("%s: size %d cosigned", phase, want), 30*time.Second, func() bool {
			n, _, err := j.LastCosigned(ctx, wid)
			return err == nil && n >= want
		})
		hi := wclk.Now()
		for size := uint64(1); size <= want; size++ {
			if _, ok := cosigned[size]; ok {
				continue
			}
			cos, err := j.Cosignatures(ctx, size)
			if err != nil || cos[wid] == nil {
				continue
			}
			sc, _ := j.SignedCheckpointAt(ctx, size)
			ev, err := pol.Evaluate(append(append([]byte(nil), sc.Note...), cos[wid]...))
			if err != nil || !ev.Witnesses[0].Cosigned {
				t.Fatalf("%s: the cosignature kept at %d does not verify: %v", phase, size, err)
			}
			cosigned[size] = cosig{at: ev.Witnesses[0].Time, lo: lo, hi: hi}
		}
	}

	seal(5)
	witnessedAll("start", wclk.Now())
	for _, step := range []struct {
		name       string
		jOff, wOff time.Duration
		down       bool // the witness is unreachable as the journal's clock jumps
	}{
		{"journal clock back an hour", -time.Hour, 0, false},
		{"witness clock back an hour", -time.Hour, -time.Hour, false},
		{"both forward two hours", time.Hour, time.Hour, false},
		{"journal clock back two hours with a retry pending", -time.Hour, time.Hour, true},
		{"witness clock back two hours", -time.Hour, -time.Hour, false},
		{"both back to true time", 0, 0, false},
	} {
		if step.down {
			reachable.Store(false)
			before, _, _ := j.LastCosigned(ctx, wid)
			seal(3)
			// A retry is pending, timed by the clock before the jump.
			until(t, step.name+": a failed attempt is pending", 30*time.Second, func() bool {
				p, err := j.NextPublication(ctx, wid)
				return err == nil && p != nil && p.Size > before && p.Attempts > 0
			})
		}
		jclk.set(step.jOff)
		wclk.set(step.wOff)
		lo := wclk.Now()
		reachable.Store(true)
		seal(5)
		witnessedAll(step.name, lo)
		t.Logf("%s: signed size %d, witness clock %v off", step.name, seen.last, wclk.offset())
	}

	// Every cosignature carries the witness's clock when it signed: within
	// its phase, to the second.
	for size, c := range cosigned {
		if c.at.Before(c.lo.Truncate(time.Second)) || c.at.After(c.hi) {
			t.Errorf("size %d: cosignature time %v, outside the witness's clock %v..%v while it signed", size, c.at, c.lo, c.hi)
		}
	}
	held, err := wst.LatestCheckpoint(ctx, witness.OriginHash(lg.Origin))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()
	kept := checkSigned(t, j)
	seen.check(t, kept)
	if k := kept[sizeOf(t, body(held))]; string(k) != string(body(held)) {
		t.Errorf("the witness holds\n%s but the journal keeps\n%s", body(held), k)
	}
	j.Close()
	verifyAll(t, db)
}
