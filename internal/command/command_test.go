package command

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runRoot builds a root with one subcommand "do" whose body returns bodyErr
// and runs it with args.
func runRoot(t *testing.T, r Root, bodyErr error, args ...string) (code int, stdout, stderr string, log *slog.Logger) {
	t.Helper()
	var out, errOut bytes.Buffer
	r.Use, r.Short = "tool", "a tool"
	r.Stderr = &errOut
	r.SetLogger = func(l *slog.Logger) { log = l }
	root := NewRoot(r)
	root.AddCommand(&cobra.Command{
		Use:  "do",
		Args: cobra.NoArgs,
		RunE: WrapRun(1, func(*cobra.Command, []string) error { return bodyErr }),
	})
	cmd, err := Execute(context.Background(), root, args, strings.NewReader(""), &out, &errOut)
	code = Exit(&errOut, "tool", cmd, err)
	return code, out.String(), errOut.String(), log
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name    string
		r       Root
		bodyErr error
		args    []string
		code    int
		stderr  string // substring
		help    bool   // the --help hint is printed
	}{
		{"success", Root{LogLevel: "warn"}, nil, []string{"do"}, 0, "", false},
		{"no command", Root{LogLevel: "warn"}, nil, nil, ExitUsage, "tool: a command is required", true},
		{"unknown command", Root{LogLevel: "warn"}, nil, []string{"nope"}, ExitUsage, "unknown command", true},
		{"unknown flag", Root{LogLevel: "warn"}, nil, []string{"do", "--nope"}, ExitUsage, "unknown flag", true},
		{"extra argument", Root{LogLevel: "warn"}, nil, []string{"do", "x"}, ExitUsage, "tool: unknown command", true},
		{"bad log level", Root{LogLevel: "warn"}, nil, []string{"--log-level", "loud", "do"}, ExitUsage, `--log-level "loud"`, true},
		{"bad log format", Root{LogLevel: "warn", LogFormat: "text"}, nil, []string{"--log-format", "xml", "do"}, ExitUsage, `--log-format "xml"`, true},
		{"no log format flag without LogFormat", Root{LogLevel: "warn"}, nil, []string{"--log-format", "json", "do"}, ExitUsage, "unknown flag: --log-format", true},
		{"body error gets the default code", Root{LogLevel: "warn"}, errors.New("disk full"), []string{"do"}, 1, "tool: disk full", false},
		{"body error keeps its code", Root{LogLevel: "warn"}, Exitf(4, "forked"), []string{"do"}, 4, "tool: forked", false},
		{"usage error from a body", Root{LogLevel: "warn"}, Usagef("--n %d: too big", 9), []string{"do"}, ExitUsage, "tool: --n 9: too big", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr, _ := runRoot(t, tc.r, tc.bodyErr, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tc.stderr)
			}
			if got := strings.Contains(stderr, "--help' for usage."); got != tc.help {
				t.Errorf("--help hint printed: %v, want %v; stderr %q", got, tc.help, stderr)
			}
		})
	}
}

func TestLogger(t *testing.T) {
	tests := []struct {
		name      string
		r         Root
		args      []string
		wantDebug bool
		wantJSON  bool
	}{
		{"default level", Root{LogLevel: "warn"}, []string{"do"}, false, false},
		{"debug", Root{LogLevel: "warn"}, []string{"--log-level", "debug", "do"}, true, false},
		{"json", Root{LogLevel: "info", LogFormat: "text"}, []string{"--log-format", "json", "do"}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr, log := runRoot(t, tc.r, nil, tc.args...)
			if code != 0 || log == nil {
				t.Fatalf("exit %d, logger set: %v; stderr %q", code, log != nil, stderr)
			}
			ctx := context.Background()
			if got := log.Enabled(ctx, slog.LevelDebug); got != tc.wantDebug {
				t.Errorf("debug enabled: %v, want %v", got, tc.wantDebug)
			}
			_, isJSON := log.Handler().(*slog.JSONHandler)
			if isJSON != tc.wantJSON {
				t.Errorf("JSON handler: %v, want %v", isJSON, tc.wantJSON)
			}
		})
	}
}

// TestHelpOnStderr: the root without a command prints its help to stderr,
// never stdout, so a script piping stdout gets nothing unexpected.
func TestHelpOnStderr(t *testing.T) {
	_, stdout, stderr, _ := runRoot(t, Root{LogLevel: "warn", Long: "LONG HELP"}, nil)
	if stdout != "" || !strings.Contains(stderr, "LONG HELP") {
		t.Errorf("stdout %q, stderr %q: want the help on stderr only", stdout, stderr)
	}
}
