package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/internal/acked"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// appenderChild is the crash test's concurrent writer: workers goroutines,
// each leasing a fresh run, appending batches of 1 to 16 records, then
// concluding, sealing and releasing it, forever. After every append returns
// it prints "A RUN SEQ HASH" per record, and "S RUN LEAF" after every seal:
// a printed line is an acknowledgement, so it must survive SIGKILL.
func appenderChild(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: appender DB WORKERS")
		return 2
	}
	workers, _ := strconv.Atoi(args[1])
	ctx := context.Background()
	s, err := sqlite.Open(ctx, args[0], sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	ack := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.Write(b) // unbuffered: written before the next append starts
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "appender:", err)
		os.Exit(1)
	}
	for range workers {
		go func() {
			for {
				run := store.NewRunID()
				l, err := s.Acquire(ctx, run, "crash", time.Hour)
				if err != nil {
					fail(err)
				}
				for i := range 1 + rand.IntN(6) {
					batch := make([]store.Append, 1+rand.IntN(16))
					for j := range batch {
						batch[j] = store.Append{Run: run, Kind: "Step", Fields: []byte(fmt.Sprintf(`{"i":%d,"j":%d,"pad":"%s"}`, i, j, strings.Repeat("p", rand.IntN(512))))}
					}
					if i == 0 {
						key := store.Sum([]byte(run.String()))
						batch[0] = store.Append{Run: run, Kind: store.KindEffectStarted, EffectKey: &key}
					}
					recs, err := s.Append(ctx, l.Epoch, batch)
					if err != nil {
						fail(err)
					}
					var b strings.Builder
					for _, r := range recs {
						fmt.Fprintf(&b, "A %s %d %s\n", r.Run, r.Seq, r.Hash)
					}
					ack([]byte(b.String()))
				}
				if _, err := s.Append(ctx, l.Epoch, []store.Append{{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)}}); err != nil {
					fail(err)
				}
				leaf, err := s.Seal(ctx, run, l.Epoch, "succeeded")
				if err != nil {
					fail(err)
				}
				ack([]byte(fmt.Sprintf("S %s %s\n", run, leaf)))
				if err := s.ReleaseLease(ctx, run, l.Epoch); err != nil {
					fail(err)
				}
			}
		}()
	}
	select {}
}

// acks is what children acknowledged, across rounds.
type acks struct{ *acked.Set }

func (a acks) add(t *testing.T, l string) {
	t.Helper()
	f := strings.Fields(l)
	if len(f) == 3 && f[0] == "S" { // the appender child's seal
		run, err := store.ParseRunID(f[1])
		leaf, derr := store.ParseDigest(f[2])
		if err != nil || derr != nil {
			t.Fatalf("ack %q", l)
		}
		a.Seal(run, leaf)
		return
	}
	if len(f) == 4 && f[0] == "A" { // the appender child's record
		f = f[1:]
	}
	// Now "RUN SEQ HASH", which is also what journal append prints.
	if len(f) != 3 {
		t.Fatalf("unexpected child output %q", l)
	}
	run, err := store.ParseRunID(f[0])
	seq, serr := strconv.ParseUint(f[1], 10, 64)
	d, derr := store.ParseDigest(f[2])
	if err != nil || serr != nil || derr != nil {
		t.Fatalf("ack %q", l)
	}
	a.Record(run, store.Seq(seq), d)
}

// TestCrashSIGKILL kills real appending processes with SIGKILL at random
// moments, round after round on one journal, and checks that every
// acknowledged record and seal is there and that verify --all passes.
// Even rounds run the concurrent appender (group commit, seals, leases);
// odd rounds run "journal append" itself over a file of many runs.
func TestCrashSIGKILL(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	db := newJournal(t)
	got := acks{acked.New()}
	rounds := 8
	if testing.Short() {
		rounds = 4
	}
	for round := range rounds {
		var cmd *exec.Cmd
		if round%2 == 0 {
			cmd = exec.Command(exe, db, "16")
			cmd.Env = append(os.Environ(), childEnv+"=appender")
		} else {
			input := filepath.Join(t.TempDir(), "in.jsonl")
			writeCrashInput(t, input, 5000) // 5000 batches, each an fsync: more than a round can write
			cmd = exec.Command(exe, "append", "--db", db, "--epoch", "1", input)
			cmd.Env = append(os.Environ(), childEnv+"=cli")
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			br := bufio.NewReader(out)
			for {
				l, err := br.ReadString('\n')
				if err != nil {
					return // a line cut by the kill was never acknowledged
				}
				lines <- strings.TrimSuffix(l, "\n")
			}
		}()
		// Kill after a random number of acknowledgements, so the kill
		// lands while writes are in flight: counted, not timed, so the
		// child always has work left (the appender never ends; the file
		// holds about 12,500 records) however fast or loaded the machine.
		first, ok := <-lines
		if !ok {
			cmd.Wait()
			t.Fatalf("round %d: child acknowledged nothing: %s", round, stderr.String())
		}
		before, _ := got.Counts()
		got.add(t, first)
		for k := rand.IntN(2500); k > 0; k-- {
			l, ok := <-lines
			if !ok {
				cmd.Wait()
				now, _ := got.Counts()
				t.Fatalf("round %d: child ended before its kill, after %d acknowledgements: %s", round, now-before, stderr.String())
			}
			got.add(t, l)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for l := range lines {
			got.add(t, l)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child was not killed mid-work (%v): %s", round, err, stderr.String())
		}
		n, seals := got.Counts()
		t.Logf("round %d: killed after %d acknowledged records (%d in total, %d seals)", round, n-before, n, seals)
		checkAcked(t, db, got)
		// verify --all in a fresh process, as an operator would run it.
		v := exec.Command(exe, "verify", "--all", "--db", db)
		v.Env = append(os.Environ(), childEnv+"=cli")
		if vout, err := v.CombinedOutput(); err != nil {
			t.Fatalf("round %d: verify --all after SIGKILL: %v\n%s", round, err, vout)
		}
	}
}

func writeCrashInput(t *testing.T, path string, runs int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for range runs {
		run := store.NewRunID()
		for i := range 1 + rand.IntN(4) {
			fmt.Fprintf(w, `{"run":"%s","kind":"Step","i":%d,"pad":"%s"}`+"\n", run, i, strings.Repeat("q", rand.IntN(256)))
		}
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// checkAcked reads every acknowledged run back and compares hashes, and
// checks every acknowledged seal is in the log with its leaf.
func checkAcked(t *testing.T, db string, got acks) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := got.Check(ctx, s); err != nil {
		t.Fatal(err)
	}
}
