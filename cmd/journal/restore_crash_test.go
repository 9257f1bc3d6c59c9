package main

import (
	"bytes"
	"context"
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

	"github.com/runseal/runseal/store"
)

// Issue 17 item 5: "journal restore" killed with SIGKILL mid-restore, and
// then "journal restore --resume" killed too, is finished by a last
// "journal restore --resume" on the same target: the target verifies and
// exports to exactly the source's runs and log, so no run was duplicated
// or lost. A plain restore of the partial target is refused.
func TestRestoreSIGKILLThenResume(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs := 1200
	if testing.Short() {
		runs = 400
	}
	src := newJournal(t)
	s := openStore(t, src, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < runs; i += 8 {
				var run store.RunID
				run[0], run[14], run[15] = 0x07, byte(i>>8), byte(i)
				batch := []store.Append{
					{Run: run, Kind: store.KindRunAdmitted, Fields: fmt.Appendf(nil, `{"admission_key":"k-%d"}`, i)},
					{Run: run, Kind: "Note", Fields: []byte(`{"text":"x"}`)},
					{Run: run, Kind: store.KindRunConcluded, Fields: []byte(`{"outcome":"succeeded"}`)},
				}
				if _, err := s.Append(ctx, 1, batch); err != nil {
					errs <- err
					return
				}
				if i%3 != 0 { // a third stay unsealed
					if _, err := s.Seal(ctx, run, 1, "succeeded"); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	exportFile := filepath.Join(t.TempDir(), "export.jsonl")
	mustCLI(t, src, "", "export", "--out", exportFile)

	target := newJournal(t)
	journal := func(args ...string) *exec.Cmd {
		c := exec.Command(exe, append([]string{"--db", target}, args...)...)
		c.Env = append(os.Environ(), childEnv+"=cli")
		return c
	}
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("needs /proc/PID/io to see the child write")
	}
	// A whole restore into a scratch journal says how much a restore
	// writes, so the kills below land inside one whatever its speed. The
	// child counts its own writes (wchar) as it exits.
	scratch := newJournal(t)
	c := exec.Command(exe, "--db", scratch, "restore", exportFile, "--bulk-runs", "100", "--bulk-seals", "100")
	c.Env = append(os.Environ(), childEnv+"=cli-wchar")
	var calib bytes.Buffer
	c.Stderr = &calib
	err = c.Run()
	var total int64
	if i := bytes.LastIndex(calib.Bytes(), []byte("wchar ")); i >= 0 {
		total, _ = strconv.ParseInt(strings.TrimSpace(calib.String()[i+len("wchar "):]), 10, 64)
	}
	t.Logf("a whole restore writes %d bytes", total)
	if err != nil || total < 2<<20 {
		t.Fatalf("the calibrating restore: %v, %d bytes written: %s", err, total, calib.String())
	}
	// Bulks of 100 runs and 100 seals: a whole restore commits about 20
	// times, so a kill anywhere after the first reading leaves a partial
	// target (default bulks would hold this export's runs in one).
	small := []string{"--bulk-runs", "100", "--bulk-seals", "100"}
	var finishedFirst int // round 0's restores that ended before their kill
	rounds := [][]string{append([]string{"restore", exportFile}, small...), append([]string{"restore", "--resume", exportFile}, small...)}
	for round := 0; round < len(rounds); round++ {
		args := rounds[round]
		c := journal(args...)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { c.Wait(); close(exited) }()
		// Wait until the child has written a random part of a whole
		// restore, then kill it. The first reading writes only temporary
		// files (a few hundred KB here), so the first kill comes after 768 KB and
		// within the first half. The resume's share of the writes depends
		// on where that kill fell (records are a small part of the bytes,
		// a bulk of seals a large one), so it is killed early, and a
		// resume that finished first is not a failure: the last resume
		// below must then find everything done.
		mark := 768<<10 + rand.Int64N(total/2-768<<10)
		if round == 1 {
			mark = 128<<10 + rand.Int64N(total/8)
		}
		ended := false
		for !ended && written(c.Process.Pid) < mark {
			select {
			case <-exited:
				ended = true
			case <-time.After(2 * time.Millisecond):
			}
		}
		if ended && round == 0 {
			// The restore outran this process's sampling of its writes (a
			// loaded machine): that is the machine's doing, not a failure.
			// Start again on a new target.
			if !c.ProcessState.Success() {
				t.Fatalf("round 0: %v failed: %s", args, out.String())
			}
			if finishedFirst++; finishedFirst == 5 {
				t.Fatalf("round 0: five restores finished before the kill could land: %s", out.String())
			}
			t.Logf("round 0: %v finished before it was killed; again on a new target", args)
			target = newJournal(t)
			round--
			continue
		}
		if ended {
			t.Logf("round %d: %v finished before it was killed", round, args)
			continue
		}
		if err := c.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: %v was not killed mid-restore: %s", round, args, out.String())
		}
		if round == 0 {
			r := cli(t, target, "", "restore", exportFile)
			if r.code == 0 || !strings.Contains(r.stderr, "resume") {
				t.Fatalf("a plain restore of the partial target: exit %d: %s", r.code, r.stderr)
			}
		}
	}
	r := cli(t, target, "", "restore", "--resume", "--json", exportFile)
	if r.code != 0 || !strings.Contains(r.stdout, `"resumed":true`) {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("resumed: %s", strings.TrimSpace(r.stdout))
	mustCLI(t, target, "", "verify", "--all")
	again := filepath.Join(t.TempDir(), "again.jsonl")
	mustCLI(t, target, "", "export", "--out", again)
	a, _ := os.ReadFile(exportFile)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a[bytes.IndexByte(a, '\n'):], b[bytes.IndexByte(b, '\n'):]) {
		t.Fatal("the resumed journal's export differs from the source's beyond its header")
	}
}

// written is the bytes process pid has passed to write calls so far
// (wchar of /proc/PID/io), or 0.
func written(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
