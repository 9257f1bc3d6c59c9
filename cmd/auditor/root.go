package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/runseal/runseal/audit"
	"github.com/runseal/runseal/internal/command"
)

// Exit codes. They are the auditor's contract: scripts and cron jobs branch
// on them, so each means one thing for every command.
const (
	exitSound        = audit.ExitSound        // everything checked holds
	exitNotSound     = audit.ExitNotSound     // something checked is false or inconsistent: evidence of tampering or corruption
	exitUsage        = audit.ExitUsage        // the command line was wrong
	exitUnverifiable = audit.ExitUnverifiable // no verdict: a cut file, an unknown format, keys or a policy that cannot establish the checkpoint, an I/O or network failure
	exitFork         = 4                      // monitor: the log forked; self-contained evidence was written
)

func usageErrorf(format string, args ...any) error { return command.Usagef(format, args...) }

func unverifiablef(format string, args ...any) error {
	return command.Exitf(exitUnverifiable, format, args...)
}

// verdictError ends a command with a verdict's exit code after its report
// was printed; the message is a one-line summary for stderr.
func verdictError(code int, format string, args ...any) error {
	return command.Exitf(code, format, args...)
}

// app is the state shared by the commands of one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
	// exe is the path to re-execute for bench's child processes; the
	// running binary when empty.
	exe string
}

// run executes the CLI with args (without the program name) and returns
// the process exit code. It is main without the process, for tests.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	cmd, err := command.Execute(ctx, a.newRoot(), args, stdin, stdout, stderr)
	return command.Exit(stderr, "auditor", cmd, err)
}

const rootLong = `auditor checks runseal evidence alone: it trusts nothing but the keys you
give it.

  verify       a disclosure package, offline: every record, chain, seal and
               inclusion proof, the log's signature and the witness quorum
  consistency  one consistency proof between two signed checkpoints
  inclusion    one inclusion proof (a C2SP tlog-proof file)
  monitor      follow a running log: verify each new checkpoint and its
               consistency with the last one, refuse rollbacks, and write
               self-contained evidence on a fork
  bench        measure verification throughput and memory on a generated package
  web          write the in-browser verification page as static files

Keys: --log-key takes the log's note verifier key ("<origin>+<id>+<base64>");
witnesses come from --witness keys and --quorum K, or from a C2SP tlog-policy
file with --policy. A key argument starting with @ is read from that file.
Without any witness policy the witnesses are not checked and the verdict is
"unverifiable": to accept unwitnessed checkpoints on purpose, pass a policy
file containing "quorum none".

Reports are text for people; --json prints the same as one JSON document.
Logs go to stderr.

Exit codes (the same for every command):
  0  sound: everything checked holds
  1  not sound: something is false or inconsistent (tampering or corruption)
  2  usage error
  3  incomplete or unverifiable: a cut file, an unknown format or version,
     keys or a policy that cannot establish the checkpoint, an I/O or
     network failure
  4  monitor only: the log forked; evidence was written to the state dir`

func (a *app) newRoot() *cobra.Command {
	root := command.NewRoot(command.Root{
		Use:       "auditor",
		Short:     "Verify runseal disclosure packages and proofs, and monitor logs",
		Long:      rootLong,
		LogLevel:  "warn",
		Stderr:    a.stderr,
		SetLogger: func(l *slog.Logger) { a.log = l },
	})
	root.AddCommand(a.verifyCmd(), a.consistencyCmd(), a.inclusionCmd(), a.monitorCmd(), a.benchCmd(), a.benchGenerateCmd(), a.webCmd())
	return root
}

// wrapRun turns a command body's error into an exitError: one without a
// code is "unverifiable" (the command could not come to a verdict), never
// a usage error, because it came after the command line was accepted.
func wrapRun(fn func(cmd *cobra.Command, args []string) error) func(cmd *cobra.Command, args []string) error {
	return command.WrapRun(exitUnverifiable, fn)
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isTerminal reports whether w is a terminal, for a progress bar that would
// only clutter a log file.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
