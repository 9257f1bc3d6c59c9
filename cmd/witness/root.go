package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/internal/command"
	"github.com/runseal/runseal/witness"
)

// Exit codes. They are part of the CLI's contract: scripts branch on them.
const (
	exitOK      = 0 // success
	exitFailure = 1 // the command failed or was refused; nothing was left half-done
	exitUsage   = 2 // the command line was wrong: unknown command or flag, bad argument
)

// Environment variables that override the default paths.
const (
	envDB  = "RUNSEAL_WITNESS_DB"
	envKey = "RUNSEAL_WITNESS_KEY"
)

// Default paths, relative to the working directory so that an operator who
// runs the witness beside its files finds them, and nothing is hidden in a
// home directory.
const (
	defaultDB  = "witness.db"
	defaultKey = "witness.key"
)

// usageErrorf reports a wrong command line (exit 2).
func usageErrorf(format string, args ...any) error { return command.Usagef(format, args...) }

// app is the state shared by every command of one invocation.
type app struct {
	stdout, stderr io.Writer
	log            *slog.Logger

	db string // --db
}

// run executes the CLI with args (without the program name) and returns the
// process exit code. It is main without the process: tests drive it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr}
	cmd, err := command.Execute(ctx, a.newRoot(), args, strings.NewReader(""), stdout, stderr)
	return command.Exit(stderr, "witness", cmd, err)
}

const rootLong = `witness runs a transparency-log witness (C2SP tlog-witness): it cosigns a
log's signed checkpoint only if it is consistent with the last checkpoint it
cosigned for that log, and only once the new one is on disk.

Getting started:
  witness init --name witness.example/w1     create the key and the state file
  witness add-log log.example/acme --key <log vkey> --qpd 86400
  witness serve                              listen on localhost:7380

Files:
  state   --db PATH, else $` + envDB + `, else ./` + defaultDB + `
          One SQLite file (WAL, synchronous=FULL). Only "init" creates it;
          every other command refuses a path where none exists.
  key     --key PATH, else $` + envKey + `, else ./` + defaultKey + `
          Created by "init" with mode 0600; never printed. "witness key"
          prints the verifier key to give to log operators.

Output is text for people or JSON where it is data (--json, and JSON Lines
for list-logs and evidence). Errors and logs go to stderr.

Exit codes:
  0  success
  1  failure: the command was refused or failed; nothing was half-done
  2  usage error: unknown command or flag, missing or malformed argument`

func (a *app) newRoot() *cobra.Command {
	root := command.NewRoot(command.Root{
		Use:       "witness",
		Short:     "Run and administer a C2SP tlog-witness",
		Long:      rootLong,
		LogLevel:  "info",
		LogFormat: "text",
		Stderr:    a.stderr,
		SetLogger: func(l *slog.Logger) { a.log = l },
	})
	root.PersistentFlags().StringVar(&a.db, "db", "", "state file (default $"+envDB+", else ./"+defaultDB+")")

	root.AddCommand(
		a.initCmd(),
		a.keyCmd(),
		a.serveCmd(),
		a.addLogCmd(),
		a.addKeyCmd(),
		a.delKeyCmd(),
		a.setLimitsCmd(),
		a.listLogsCmd(),
		a.importLogsCmd(),
		a.evidenceCmd(),
		a.loadtestCmd(),
	)
	return root
}

// wrapRun turns a command body's error into an exitError: an error that does
// not already carry a code is a failure of the command (exit 1), never a
// usage error, because it came after the command line was accepted.
func wrapRun(fn func(cmd *cobra.Command, args []string) error) func(cmd *cobra.Command, args []string) error {
	return command.WrapRun(exitFailure, fn)
}

// dbPath resolves the state path: --db, then $RUNSEAL_WITNESS_DB, then the
// default.
func (a *app) dbPath() string {
	if a.db != "" {
		return a.db
	}
	if p := os.Getenv(envDB); p != "" {
		return p
	}
	return defaultDB
}

// keyPaths resolves the key files: the --key flags, then
// $RUNSEAL_WITNESS_KEY, then the default.
func keyPaths(flags []string) []string {
	if len(flags) > 0 {
		return flags
	}
	if p := os.Getenv(envKey); p != "" {
		return []string{p}
	}
	return []string{defaultKey}
}

// withStore opens the existing state file, runs fn and closes the file,
// reporting a close failure only when fn succeeded.
func (a *app) withStore(ctx context.Context, fn func(st *witness.Store) error) error {
	st, err := witness.OpenStore(ctx, a.dbPath(), witness.StoreOptions{Logger: a.log})
	if errors.Is(err, witness.ErrNoState) {
		return fmt.Errorf("%w: pass --db or set $%s, or create one with 'witness init'", err, envDB)
	}
	if err != nil {
		return err
	}
	err = fn(st)
	if cerr := st.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close state: %w", cerr)
	}
	return err
}

// loadCosigners reads the witness keys from key files: one or more
// "PRIVATE+KEY+..." lines of type 0x04 each; blank lines and lines starting
// with '#' are ignored. A key file readable by others is used, with a
// warning, because refusing would only move the secret to a worse place in
// an emergency.
func (a *app) loadCosigners(paths []string) ([]*checkpoint.Cosigner, error) {
	var out []*checkpoint.Cosigner
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("witness key: %w (create one with 'witness init')", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			a.log.Warn("witness key file is readable by group or others; chmod 600 it", "path", p, "mode", fi.Mode().Perm().String())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("witness key: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		n := 0
		for line := 1; sc.Scan(); line++ {
			t := strings.TrimSpace(sc.Text())
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			c, err := checkpoint.NewCosigner(t)
			if err != nil {
				// checkpoint's messages name the key, never its secret.
				return nil, fmt.Errorf("witness key %s:%d: %w", p, line, err)
			}
			out = append(out, c)
			n++
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("witness key %s: %w", p, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("witness key %s: no key in the file", p)
		}
	}
	return out, nil
}

// writeJSON writes v as one JSON document on its own line.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
