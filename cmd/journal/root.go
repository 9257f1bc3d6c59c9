package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/runseal/runseal/internal/command"
	"github.com/runseal/runseal/store"
)

// Exit codes. They are part of the CLI's contract: scripts branch on them.
const (
	exitOK      = 0 // success; for verify, every chain checked is intact
	exitFailure = 1 // the command failed or a verification failed; nothing was left half-done
	exitUsage   = 2 // the command line was wrong: unknown command or flag, bad argument
)

// envDB names the environment variable that overrides the default path.
const envDB = "RUNSEAL_DB"

// defaultDB is the journal path when neither --db nor $RUNSEAL_DB is set.
// A path relative to the working directory keeps the CLI predictable for
// operators who run it beside their deployment, and leaves nothing hidden in
// a home directory.
const defaultDB = "runseal.db"

// peakRSSPrefix starts the line --peak-rss prints; bench parses it.
const peakRSSPrefix = "journal: peak RSS KiB: "

// usageErrorf reports a wrong command line (exit 2).
func usageErrorf(format string, args ...any) error { return command.Usagef(format, args...) }

// app is the state shared by every command of one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger

	db       string // --db
	storeArg string // --store: a journal path or a postgres:// DSN
	key      string // --key
	tenant   string // --tenant
	peakRSS  bool   // --peak-rss (hidden): report peak RSS on exit, for bench
	onePass  bool   // the command reads the journal once and proves nothing (nodeCacheBytes, export.go)
	serving  bool   // the command serves proofs until stopped: the store warms them (serve.go)

	onServe func(addr string) // tests learn where serve listens

	sealing sealingState // --keyring (sealing.go)
}

// run executes the CLI with args (without the program name) and returns the
// process exit code. It is main without the process: tests drive it directly.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runApp(ctx, &app{stdin: stdin, stdout: stdout, stderr: stderr}, args)
}

// runApp is run with a prepared app, so tests can set hooks such as onServe.
func runApp(ctx context.Context, a *app, args []string) int {
	stdin, stdout, stderr := a.stdin, a.stdout, a.stderr
	cmd, err := command.Execute(ctx, a.newRoot(), args, stdin, stdout, stderr)
	if a.peakRSS {
		if kib, ok := peakRSSKiB(); ok {
			fmt.Fprintf(stderr, "%s%d\n", peakRSSPrefix, kib)
		}
	}
	return command.Exit(stderr, "journal", cmd, err)
}

const rootLong = `journal operates a runseal journal: an append-only, hash-chained history of
workflow runs kept in one SQLite file (WAL, synchronous=FULL: an append that
was acknowledged is on disk).

The journal file:
  --db PATH          if given, else
  $RUNSEAL_DB        if set and not empty, else
  ./runseal.db       in the current directory.
Only "journal init" and "journal serve" create a file; every other command
refuses a path where no journal exists, so a typo never starts an empty
journal. --store takes a journal path or a postgres:// DSN instead.

Output is text for people; --json gives machine output: one JSON document,
or JSON Lines for streams (read, append, verify --all). Errors and logs go to
stderr.

Exit codes:
  0  success (for verify: every chain checked is intact)
  1  failure: the command was refused or failed, or a verification failed;
     the message names the run and seq. Every write is all or nothing
     (append: each run's batch; see "journal append --help").
  2  usage error: unknown command or flag, missing or malformed argument`

func (a *app) newRoot() *cobra.Command {
	root := command.NewRoot(command.Root{
		Use:       "journal",
		Short:     "Operate a runseal journal: append, read, verify, lease, seal",
		Long:      rootLong,
		LogLevel:  "warn",
		Stderr:    a.stderr,
		SetLogger: func(l *slog.Logger) { a.log = l },
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.db, "db", "", "journal file (default $"+envDB+", else ./"+defaultDB+")")
	pf.StringVar(&a.storeArg, "store", "", "journal file or postgres:// DSN (default: --db)")
	pf.StringVar(&a.key, "key", "", "the log's private note key file (default $"+envKey+", else the journal path + \".key\")")
	pf.StringVar(&a.tenant, "tenant", store.DefaultTenant, "tenant whose runs to reach")
	pf.BoolVar(&a.peakRSS, "peak-rss", false, "print this process's peak RSS to stderr on exit")
	_ = pf.MarkHidden("peak-rss")

	root.AddCommand(
		a.initCmd(),
		a.appendCmd(),
		a.readCmd(),
		a.runsCmd(),
		a.verifyCmd(),
		a.leaseCmd(),
		a.sealCmd(),
		a.cancelCmd(),
		a.benchCmd(),
		a.keyCmd(),
		a.checkpointCmd(),
		a.proofCmd(),
		a.studyCmd(),
		a.serveCmd(),
		a.tokenCmd(),
		a.witnessedCmd(),
		a.exportCmd(),
		a.restoreCmd(),
		a.discloseCmd(),
		a.disclosuresCmd(),
		a.backupCmd(),
		a.tilesCmd(),
	)
	a.addSealing(root)
	return root
}

// wrapRun turns a command body's error into an exitError: an error that does
// not already carry a code is a failure of the command (exit 1), never a
// usage error, because it came after the command line was accepted.
func wrapRun(fn func(cmd *cobra.Command, args []string) error) func(cmd *cobra.Command, args []string) error {
	return command.WrapRun(exitFailure, fn)
}

// writeJSON writes v as one JSON document on its own line. HTML escaping is
// off: record bodies are shown as they are, not as a browser would want.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// parseRunArg parses a RUN argument; a malformed one is a usage error.
func parseRunArg(s string) (store.RunID, error) {
	r, err := store.ParseRunID(s)
	if err != nil {
		return r, usageErrorf("RUN %q is not a run id (a 26-character ULID, optionally prefixed run_)", s)
	}
	return r, nil
}

// parseEpoch validates an --epoch flag value.
func parseEpoch(e uint64) (store.Epoch, error) {
	if err := store.ValidateEpoch(store.Epoch(e)); err != nil {
		return 0, usageErrorf("--epoch %d: must be from 1 to 2^62 (epochs start at 1)", e)
	}
	return store.Epoch(e), nil
}

// isTerminal reports whether w is a terminal, for progress lines that would
// only clutter a log file.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// oneLine keeps a message on one line for text output.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
