package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runseal/runseal/api"
	"github.com/runseal/runseal/internal/acked"
)

// EnvFaults turns the campaign on: "1" runs the scenarios.
const EnvFaults = "RUNSEAL_FAULTS"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// campaign skips t unless the fault campaign is on.
func campaign(t *testing.T) {
	t.Helper()
	if os.Getenv(EnvFaults) != "1" {
		t.Skipf("fault campaign: set %s=1 (scripts/faults.sh) to run", EnvFaults)
	}
}

// needRoot skips t, saying why, unless it runs as root (for mounts).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs: run scripts/faults.sh as root")
	}
}

// bin returns the path of the named program (journal or witness), built
// once per test binary from this module with go build.
func bin(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "runseal-faults-bin-")
		if buildErr != nil {
			return
		}
		for _, p := range []string{"journal", "witness"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, p), "github.com/runseal/runseal/cmd/"+p).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", p, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// run runs a program to completion and returns its stdout; it fails t when
// the program fails.
func run(t *testing.T, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin(t, prog), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", prog, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// proc is a running program whose stderr is kept and watched line by line.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  []string
	cond *sync.Cond
	done bool
}

// start starts prog with args and keeps its stderr. It is killed when t ends.
func start(t *testing.T, env []string, prog string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin(t, prog), args...)}
	p.cond = sync.NewCond(&p.mu)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log = append(p.log, sc.Text())
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.done = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL and waits for the process to end.
func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// wait returns the first line from index from on matching re, waiting for
// it until timeout; ok is false when the process ended or time ran out.
func (p *proc) wait(re *regexp.Regexp, from int, timeout time.Duration) (line string, at int, ok bool) {
	expired := false // under p.mu
	deadline := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		expired = true
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer deadline.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; ; {
		for ; i < len(p.log); i++ {
			if re.MatchString(p.log[i]) {
				return p.log[i], i, true
			}
		}
		if p.done || expired {
			return "", i, false
		}
		p.cond.Wait()
	}
}

// lines returns the process's stderr so far.
func (p *proc) lines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

var servingRE = regexp.MustCompile(`serving .* on (http://\S+)`)

// served is a running 'journal serve' and a writer client for it.
type served struct {
	*proc
	base   string
	client *api.Client
}

// serve starts 'journal serve' on a free loopback port with the journal at
// loc (a file or a postgres:// DSN) and extra flags, and returns once it
// listens.
func serve(t *testing.T, loc, token string, extra ...string) *served {
	t.Helper()
	args := append([]string{"serve", "--store", loc, "--listen", "127.0.0.1:0", "--log-level", "info"}, extra...)
	p := start(t, nil, "journal", args...)
	l, _, ok := p.wait(servingRE, 0, 60*time.Second)
	if !ok {
		t.Fatalf("serve did not start:\n%s", p.lines())
	}
	base := servingRE.FindStringSubmatch(l)[1]
	c, err := api.NewClient(base, api.ClientOptions{Token: token, HTTPClient: nil})
	if err != nil {
		t.Fatal(err)
	}
	return &served{proc: p, base: base, client: c}
}

// newJournal creates a journal at loc and returns a writer token for it.
func newJournal(t *testing.T, loc string) string {
	t.Helper()
	run(t, "journal", "init", "--store", loc)
	return strings.TrimSpace(run(t, "journal", "token", "create", "--role", "writer", "--store", loc))
}

// newSignedJournal creates a SQLite journal of origin and returns its path,
// a writer token and its log's verifier key, for a witness policy.
func newSignedJournal(t *testing.T, origin string) (db, token, logKey string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "j.db")
	run(t, "journal", "init", "--store", db, "--origin", origin)
	token = strings.TrimSpace(run(t, "journal", "token", "create", "--role", "writer", "--store", db))
	logKey = strings.TrimSpace(run(t, "journal", "key", "--store", db))
	return db, token, logKey
}

// acks is what the journal acknowledged through its API.
type acks struct{ *acked.Set }

func newAcks() acks { return acks{acked.New()} }

func (a acks) appended(recs []api.Ack) {
	for _, r := range recs {
		a.Record(r.Run, r.Seq, r.Hash)
	}
}

// seals returns how many seals were acknowledged.
func (a acks) seals() int { _, n := a.Counts(); return n }

// records returns how many records were acknowledged.
func (a acks) records() int { n, _ := a.Counts(); return n }

// checkAcked fails t unless every acknowledged record is stored with its
// hash and every acknowledged seal is in the log with its leaf.
func checkAcked(t *testing.T, s acked.Reader, got acks) {
	t.Helper()
	if err := got.Check(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// verifyAll runs 'journal verify --all' over loc, as an operator would.
func verifyAll(t *testing.T, loc string) {
	t.Helper()
	if out, err := runErr(t, "journal", "verify", "--all", "--store", loc); err != nil {
		t.Fatalf("verify --all: %v\n%s", err, out)
	}
}

// isDiskFull reports whether err is the answer of a journal out of space.
func isDiskFull(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Status == 507
}

// runErr runs a program to completion and returns its combined output and
// error, for a failure that is itself under test.
func runErr(t *testing.T, prog string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(bin(t, prog), args...).CombinedOutput()
	return string(out), err
}
