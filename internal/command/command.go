// Package command provides the scaffolding the runseal commands (journal,
// witness, auditor) share: a cobra root command that requires a
// subcommand, the --log-level flag and its slog logger on stderr, and the
// mapping from a command's error to the process exit code.
//
// Invariants: exit code 0 means the command succeeded; exit code 2
// (ExitUsage) means the command line was wrong, including every error
// cobra itself reports (unknown command or flag, argument count), and is
// followed on stderr by a hint to run --help; any other code is the one
// an *ExitError in the error chain carries.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"
)

// ExitUsage is the exit code of a wrong command line, the same for every
// runseal command.
const ExitUsage = 2

// ExitError carries the process exit code an error maps to.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exitf returns an error that ends the process with code.
func Exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// Usagef reports a wrong command line (ExitUsage).
func Usagef(format string, args ...any) error {
	return Exitf(ExitUsage, format, args...)
}

// Root describes a command's root for NewRoot.
type Root struct {
	Use, Short, Long string

	// LogLevel is the default of --log-level.
	LogLevel string
	// LogFormat, when set, adds --log-format (text or json) with this
	// default; without it logs are text.
	LogFormat string
	// Stderr receives logs, and the help printed when no command is given.
	Stderr io.Writer
	// SetLogger is called with the logger the flags chose, before any
	// subcommand runs.
	SetLogger func(*slog.Logger)
}

// NewRoot returns the root command r describes: it takes no arguments,
// prints its help to stderr and fails with a usage error when no
// subcommand is given, reports flag errors as usage errors, silences
// cobra's own error and usage printing (Exit prints errors), has no
// completion command, and builds the logger from --log-level (and
// --log-format) before any subcommand runs.
func NewRoot(r Root) *cobra.Command {
	var level, format string
	root := &cobra.Command{
		Use:           r.Use,
		Short:         r.Short,
		Long:          r.Long,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(r.Stderr)
			_ = cmd.Help()
			return Usagef("a command is required")
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(level)); err != nil {
				return Usagef("--log-level %q: want debug, info, warn or error", level)
			}
			opts := &slog.HandlerOptions{Level: lvl}
			var log *slog.Logger
			switch {
			case r.LogFormat == "" || format == "text":
				log = slog.New(slog.NewTextHandler(r.Stderr, opts))
			case format == "json":
				log = slog.New(slog.NewJSONHandler(r.Stderr, opts))
			default:
				return Usagef("--log-format %q: want text or json", format)
			}
			if r.SetLogger != nil {
				r.SetLogger(log)
			}
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&level, "log-level", r.LogLevel, "stderr log level: debug, info, warn or error")
	if r.LogFormat != "" {
		pf.StringVar(&format, "log-format", r.LogFormat, "stderr log format: text or json")
	}
	return root
}

// Execute runs root with args and the given streams, and returns the
// command that ran (or failed to parse) and its error, for Exit.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) (*cobra.Command, error) {
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContextC(ctx)
}

// Exit maps the error of Execute to the process exit code, printing
// "name: message" to stderr and, for a usage error, a hint to --help.
func Exit(stderr io.Writer, name string, cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		// Cobra's own errors (unknown command or flag, argument count,
		// flag groups) never pass through a RunE: all are usage errors.
		ee = &ExitError{Code: ExitUsage, Err: err}
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, ee.Err)
	if ee.Code == ExitUsage && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ee.Code
}

// WrapRun turns a command body's error into an *ExitError: one that does
// not already carry a code gets code, never ExitUsage, because it came
// after the command line was accepted.
func WrapRun(code int, fn func(cmd *cobra.Command, args []string) error) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		if err == nil {
			return nil
		}
		var ee *ExitError
		if errors.As(err, &ee) {
			return err
		}
		return &ExitError{Code: code, Err: err}
	}
}
