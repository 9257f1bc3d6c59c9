package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sqlite"
)

// childEnv makes the test binary act as a program instead of running tests:
// "cli" is the journal CLI itself, "appender" the crash test's concurrent
// appender. Real processes are what SIGKILL and peak-RSS measurements need.
const childEnv = "JOURNAL_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "cli":
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case "cli-wchar":
		// The CLI, then how many bytes it passed to write calls, on the
		// last line of stderr: the whole count, which a parent sampling
		// /proc/PID/io could miss the end of.
		code := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		fmt.Fprintf(os.Stderr, "\nwchar %d\n", written(os.Getpid()))
		os.Exit(code)
	case "appender":
		os.Exit(appenderChild(os.Args[1:]))
	case "tessera":
		os.Exit(fakeTessera(os.Args[1:]))
	}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the CLI in-process against db with stdin as input.
func cli(t *testing.T, db, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	if db != "" {
		args = append([]string{"--db", db}, args...)
	}
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// mustCLI runs the CLI and fails the test unless it exits 0.
func mustCLI(t *testing.T, db, stdin string, args ...string) string {
	t.Helper()
	r := cli(t, db, stdin, args...)
	if r.code != 0 {
		t.Fatalf("journal %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// newJournal creates a journal with init and returns its path.
func newJournal(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "j.db")
	mustCLI(t, db, "", "init")
	return db
}

// openStore opens db directly, for setting up state the CLI cannot (an
// expired lease) and for checking what the CLI wrote.
func openStore(t *testing.T, db string, now func() time.Time) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// head returns a run's head as the store sees it.
func head(t *testing.T, db string, run store.RunID) store.Head {
	t.Helper()
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Head(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// rawSQL opens the journal file bypassing the store, to tamper with it.
func rawSQL(t *testing.T, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func expect(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) && !strings.Contains(r.stdout, w) {
			t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", w, r.stdout, r.stderr)
		}
	}
}

// line renders one append input line for run with extra members.
func line(run store.RunID, kind string, extra string) string {
	s := `{"run":"` + run.String() + `","kind":"` + kind + `"`
	if extra != "" {
		s += "," + extra
	}
	return s + "}\n"
}
