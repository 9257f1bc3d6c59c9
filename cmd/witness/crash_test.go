package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/log"
	"github.com/runseal/runseal/witness"
)

// TestMain lets the test binary stand in for the witness command, so the
// crash test can run "witness serve" as a real process and SIGKILL it.
func TestMain(m *testing.M) {
	if os.Getenv("WITNESS_TEST_CHILD") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// crashLog is a log that drives the witness in the crash test.
type crashLog struct {
	origin string
	signer note.Signer
	vkey   string
	nodes  log.MemStore
	size   uint64
	roots  map[uint64]log.Hash
	// acked is the largest size the witness answered 200 for: that answer
	// promised the checkpoint was on disk.
	acked uint64
	old   uint64 // the size the witness holds, as far as the log knows
}

func (l *crashLog) grow(ctx context.Context) error {
	var leaf log.Hash
	rand.Read(leaf[:])
	root, err := log.Append(ctx, &l.nodes, l.size, leaf)
	if err != nil {
		return err
	}
	l.size++
	l.roots[l.size] = root
	return nil
}

// TestCrashKeepsAcknowledgedCheckpoints kills a serving witness with
// SIGKILL while many logs submit checkpoints, restarts it, and checks that
// every checkpoint it answered 200 for is in its state: answers are sent
// only after the write is durable.
func TestCrashKeepsAcknowledgedCheckpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, key := setup(t)
	ctx := context.Background()
	const nlogs = 16
	logs := make([]*crashLog, nlogs)
	for i := range logs {
		origin := fmt.Sprintf("log.example/crash/%d", i)
		skey, vkey, _ := checkpoint.GenerateLogKey(rand.Reader, origin)
		s, _ := checkpoint.NewSigner(skey)
		logs[i] = &crashLog{origin: origin, signer: s, vkey: vkey, roots: map[uint64]log.Hash{}}
		if code, _, errs := cli(t, dir, "add-log", origin, "--key", vkey, "--qpd", fmt.Sprint(witness.MaxQPD), "--burst", fmt.Sprint(witness.MaxQPD)); code != exitOK {
			t.Fatal(errs)
		}
	}
	db := filepath.Join(dir, "witness.db")
	addrRE := regexp.MustCompile(` addr=(\S+)`)

	for round := range 3 {
		cmd := exec.Command(exe, "--db", db, "serve", "--key", key, "--listen", "127.0.0.1:0", "--metrics-listen", "")
		cmd.Env = append(os.Environ(), "WITNESS_TEST_CHILD=1")
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		var url string
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				url = "http://" + m[1]
				break
			}
		}
		go func() {
			for sc.Scan() {
			}
		}()
		if url == "" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("child witness did not start")
		}
		client, _ := witness.NewClient(url, nil)
		stop := make(chan struct{})
		var acks atomic.Int64
		var wg sync.WaitGroup
		for _, l := range logs {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if l.old == l.size {
						if err := l.grow(ctx); err != nil {
							t.Error(err)
							return
						}
					}
					msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: l.origin, Size: l.size, Root: l.roots[l.size]}, l.signer)
					if err != nil {
						t.Error(err)
						return
					}
					proof, err := log.ConsistencyProof(ctx, &l.nodes, l.old, l.size)
					if err != nil {
						t.Error(err)
						return
					}
					_, err = client.AddCheckpoint(ctx, l.old, proof, msg)
					var ce *witness.ConflictError
					switch {
					case err == nil:
						l.acked, l.old = l.size, l.size
						acks.Add(1)
					case errors.As(err, &ce):
						l.old = ce.Size
					default:
						return // the witness died
					}
				}
			})
		}
		// Kill at a random moment, once the logs are well under way
		// however busy the machine is.
		n, _ := rand.Int(rand.Reader, big.NewInt(700))
		time.Sleep(300*time.Millisecond + time.Duration(n.Int64())*time.Millisecond)
		for deadline := time.Now().Add(30 * time.Second); acks.Load() < 2*nlogs && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()

		st, err := witness.OpenStore(ctx, db, witness.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d answers 200 before SIGKILL", round, acks.Load())
		if acks.Load() == 0 {
			t.Fatalf("round %d: nothing was acknowledged; the test tested nothing", round)
		}
		for _, l := range logs {
			li, err := st.Log(ctx, l.origin)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case li.Size < l.acked:
				t.Errorf("round %d, %s: answered 200 at size %d, but the state after SIGKILL is at %d", round, l.origin, l.acked, li.Size)
			case li.Root != l.roots[li.Size] && li.Size > 0:
				t.Errorf("round %d, %s: state at size %d has a root the log never signed", round, l.origin, li.Size)
			}
			// A request may have committed without its answer getting out.
			l.old = li.Size
		}
		st.Close()
	}
	// The state file is intact after the kills.
	code, out, errs := cli(t, dir, "list-logs")
	if code != exitOK {
		t.Fatalf("list-logs after crashes: %s", errs)
	}
	lv, _ := checkpoint.NewVerifier(logs[0].vkey)
	_, wv, _ := cli(t, dir, "key", "--key", key)
	wver, _ := checkpoint.NewCosignatureVerifier(wv[:len(wv)-1])
	st, err := witness.OpenStore(ctx, db, witness.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.LatestCheckpoint(ctx, witness.OriginHash(logs[0].origin))
	if err != nil {
		t.Fatalf("stored checkpoint: %v\n%s", err, out)
	}
	if _, err := checkpoint.Open(n, note.VerifierList(lv, wver)); err != nil {
		t.Fatalf("stored note after crashes does not verify: %v", err)
	}
}
