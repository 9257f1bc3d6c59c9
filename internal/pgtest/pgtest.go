// Package pgtest gives tests a PostgreSQL server: the one named by
// $RUNSEAL_POSTGRES_DSN, or else a throwaway server started from the
// PostgreSQL binaries on this machine (initdb into a temporary directory,
// a unix socket in that directory, fsync on) and stopped when the tests end.
//
// A test that needs PostgreSQL and cannot have it fails, with the reason:
// a journal backend whose tests silently skipped has not been tested. Set
// RUNSEAL_SKIP_POSTGRES=1 to skip them on purpose.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The environment variables this package reads.
const (
	EnvDSN  = "RUNSEAL_POSTGRES_DSN"  // use this server instead of starting one
	EnvSkip = "RUNSEAL_SKIP_POSTGRES" // "1": skip PostgreSQL tests instead of failing them
)

var (
	mu       sync.Mutex
	shared   *Server
	setupErr error
)

// Main runs a test binary's tests with a PostgreSQL server available to
// DSN, and stops the server it started, if any, afterwards. Call it from
// TestMain. When no server can be had, the run fails with the reason unless
// RUNSEAL_SKIP_POSTGRES=1, in which case DSN skips each test.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		shared = &Server{DSN: dsn}
	} else {
		shared, setupErr = Start(context.Background())
		if setupErr != nil {
			if os.Getenv(EnvSkip) != "1" {
				fmt.Fprintf(os.Stderr, "pgtest: FAIL: no PostgreSQL for the tests: %v\n"+
					"pgtest: set %s to a server's DSN, install PostgreSQL (initdb, pg_ctl), or set %s=1 to skip these tests on purpose\n",
					setupErr, EnvDSN, EnvSkip)
				return 1
			}
		} else {
			defer shared.Stop()
		}
	}
	return m.Run()
}

// DSN returns the DSN of the tests' server. It skips tb when no server
// could be had and RUNSEAL_SKIP_POSTGRES=1, and fails it otherwise.
func DSN(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared == nil {
		if setupErr != nil && os.Getenv(EnvSkip) == "1" {
			tb.Skipf("PostgreSQL unavailable and %s=1: %v", EnvSkip, setupErr)
		}
		if setupErr != nil {
			tb.Fatalf("no PostgreSQL for the tests: %v", setupErr)
		}
		tb.Fatalf("pgtest: DSN called without pgtest.Main in TestMain")
	}
	return shared.DSN
}

// Server is a PostgreSQL server for tests. Dir is empty for a server this
// package did not start, which it can neither stop nor restart.
type Server struct {
	DSN    string
	Dir    string // the server's temporary directory: data, socket, log
	bin    string // directory holding pg_ctl
	asUser string // the OS user the server runs as; "" for the current one
}

// Owned reports whether this package started the server and can restart it.
func (s *Server) Owned() bool { return s.Dir != "" }

// Shared returns the server the tests of this binary share (nil before
// Main ran or when none could be had).
func Shared() *Server {
	mu.Lock()
	defer mu.Unlock()
	return shared
}

// FindBin returns a directory holding initdb and pg_ctl: from PATH, or the
// newest /usr/lib/postgresql/*/bin.
func FindBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("initdb not found in PATH or /usr/lib/postgresql/*/bin")
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises and starts a throwaway server. It listens only on a
// unix socket inside its own temporary directory, so servers started by
// parallel test binaries never collide. Durability settings stay at their
// defaults (fsync on, synchronous_commit on): durability is under test.
func Start(ctx context.Context) (*Server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "runseal-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin}
	// PostgreSQL refuses to run as root, so root runs it as "postgres".
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.asUser = "postgres"
	}
	data := filepath.Join(dir, "data")
	if out, err := s.cmd(ctx, filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, lastLines(out))
	}
	conf := strings.Join([]string{
		"listen_addresses = ''",
		"unix_socket_directories = '" + dir + "'",
		"port = 5432",
		"max_connections = 400",
		"shared_buffers = 128MB",
		"fsync = on",
		"synchronous_commit = on",
		"full_page_writes = on",
		"log_min_messages = warning",
		"",
	}, "\n")
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString("\n" + conf)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("configure server: %w", err)
	}
	s.DSN = fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", dir)
	if err := s.startServer(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	if s.asUser != "" {
		args = append([]string{"-u", s.asUser, "--", name}, args...)
		name = "runuser"
	}
	c := exec.CommandContext(ctx, name, args...)
	c.Env = append(os.Environ(), "LC_ALL=C")
	return c
}

func (s *Server) startServer(ctx context.Context) error {
	out, err := s.cmd(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-l", filepath.Join(s.Dir, "server.log"), "-w", "-t", "60", "start").CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
		return fmt.Errorf("pg_ctl start: %v: %s\nserver log: %s", err, lastLines(out), lastLines(log))
	}
	return nil
}

// Crash stops the server the way a power cut would, as far as a process
// can: immediate shutdown, no checkpoint, recovery from the WAL on restart.
func (s *Server) Crash(ctx context.Context) error { return s.stop(ctx, "immediate") }

// Restart starts a server stopped by Crash or StopFast.
func (s *Server) Restart(ctx context.Context) error {
	if !s.Owned() {
		return errors.New("pgtest: cannot restart a server this package did not start")
	}
	return s.startServer(ctx)
}

// StopFast stops the server cleanly, disconnecting clients.
func (s *Server) StopFast(ctx context.Context) error { return s.stop(ctx, "fast") }

func (s *Server) stop(ctx context.Context, mode string) error {
	if !s.Owned() {
		return errors.New("pgtest: cannot stop a server this package did not start")
	}
	out, err := s.cmd(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-m", mode, "-w", "-t", "60", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %v: %s", mode, err, lastLines(out))
	}
	return nil
}

// Stop stops a server this package started and removes its directory.
func (s *Server) Stop() {
	if !s.Owned() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.StopFast(ctx); err != nil && !strings.Contains(err.Error(), "not running") && !strings.Contains(err.Error(), "No such") {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
	}
	os.RemoveAll(s.Dir)
}

// SocketPath is the unix socket a server this package started listens on.
func (s *Server) SocketPath() string { return filepath.Join(s.Dir, ".s.PGSQL.5432") }

func lastLines(b []byte) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
