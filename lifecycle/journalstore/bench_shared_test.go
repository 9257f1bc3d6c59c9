package journalstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"encoding/json"

	"github.com/runseal/runseal/internal/pgtest"
	"github.com/runseal/runseal/lifecycle"
	"github.com/runseal/runseal/lifecycle/journalstore"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/postgres"
)

// benchConfig is a benchmark worker's job: Trials whole trials (reserve,
// claim, terminal), spread over one goroutine per study in Studies.
type benchConfig struct {
	Studies []lifecycle.StudyID `json:"studies"`
	Trials  int                 `json:"trials"`
}

// benchWorker opens, says "ready", waits for a line on stdin, runs its
// trials and says "done" (or "error: ...").
func benchWorker(ctx context.Context, s *journalstore.Storage, cfg benchConfig) int {
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 2
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(cfg.Studies))
	for i, study := range cfg.Studies {
		n := cfg.Trials / len(cfg.Studies)
		if i < cfg.Trials%len(cfg.Studies) {
			n++
		}
		wg.Go(func() {
			for range n {
				if err := wholeTrial(ctx, s, study); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

// wholeTrial is one trial claimed and completed: reserve, claim, terminal.
func wholeTrial(ctx context.Context, s *journalstore.Storage, study lifecycle.StudyID) error {
	out, err := s.ReserveAndCreateIfBudget(ctx, lifecycle.ReserveAndCreateRequest{Study: study, MaxTrials: 1 << 40})
	if err != nil {
		return err
	}
	tok, err := s.Claim(ctx, lifecycle.ClaimRequest{Trial: out.Trial, Owner: "bench"})
	if err != nil {
		return err
	}
	return s.Terminal(ctx, lifecycle.TerminalRequest{Owner: tok, State: lifecycle.TrialComplete, Values: []float64{0.5}})
}

// BenchmarkClaimCompleteProcesses measures trials claimed and completed
// per second on a shared PostgreSQL journal by 1 and 4 OS processes (each
// a JournalStorage of its own), on one study (every process contends for
// the study's advisory lock) and on 4 studies (one goroutine per study;
// with 4 processes, one study each), between two measurements of the
// PostgreSQL store's own single-record append rate at concurrency 1 and 4
// in the same run (ceiling-trials/s divides it by the 8 writes a trial
// needs, a yardstick rather than a bound: see BenchmarkClaimComplete).
// Process start-up is outside the timing: the clock starts when every
// worker has opened its storage and is told to go.
//
//	go test ./lifecycle/journalstore -run '^$' -bench ClaimCompleteProcesses -benchtime 200x
func BenchmarkClaimCompleteProcesses(b *testing.B) {
	open := func(b *testing.B) (store.Journal, func()) {
		tenant := "bench" + strings.ToLower(store.NewRunID().String())
		pg, err := postgres.Open(context.Background(), pgtest.DSN(b), postgres.Options{Tenant: tenant})
		if err != nil {
			b.Fatal(err)
		}
		return pg, func() { pg.Close() }
	}
	for _, round := range []string{"before", "after"} {
		for _, conc := range []int{1, 4} {
			b.Run(fmt.Sprintf("postgres/ceiling-%s/conc=%d", round, conc), func(b *testing.B) { benchAppendCeiling(b, open, conc) })
		}
		if round == "before" {
			for _, shape := range []struct{ procs, studies int }{{1, 1}, {4, 1}, {1, 4}, {4, 4}} {
				b.Run(fmt.Sprintf("postgres/trials/procs=%d/studies=%d", shape.procs, shape.studies), func(b *testing.B) {
					benchProcesses(b, shape.procs, shape.studies)
				})
			}
		}
	}
}

func benchProcesses(b *testing.B, procs, studies int) {
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	tenant := "benchp-" + strings.ToLower(store.NewRunID().String())
	pg, err := postgres.Open(ctx, dsn, postgres.Options{Tenant: tenant})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	s, err := journalstore.New(pg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := make([]lifecycle.StudyID, studies)
	for i := range ids {
		if ids[i], err = s.CreateStudy(ctx, lifecycle.StudySpec{Objectives: 1}); err != nil {
			b.Fatal(err)
		}
	}
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
	}
	ps := make([]proc, procs)
	for p := range ps {
		mine := ids
		if studies == procs {
			mine = ids[p : p+1]
		}
		n := b.N / procs
		if p < b.N%procs {
			n++
		}
		raw, _ := json.Marshal(workerConfig{DSN: dsn, Tenant: tenant, Proc: p, Bench: &benchConfig{Studies: mine, Trials: n}})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		ps[p] = proc{cmd, in, bufio.NewScanner(out)}
		defer cmd.Process.Kill()
	}
	for p := range ps {
		if !ps[p].out.Scan() || ps[p].out.Text() != "ready" {
			b.Fatalf("worker %d: %q", p, ps[p].out.Text())
		}
	}
	b.ResetTimer()
	start := time.Now()
	for p := range ps {
		fmt.Fprintln(ps[p].in, "go")
	}
	for p := range ps {
		if !ps[p].out.Scan() || ps[p].out.Text() != "done" {
			b.Fatalf("worker %d: %q", p, ps[p].out.Text())
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	for p := range ps {
		ps[p].in.Close()
		if err := ps[p].cmd.Wait(); err != nil {
			b.Fatalf("worker %d: %v", p, err)
		}
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "trials/s")
}
