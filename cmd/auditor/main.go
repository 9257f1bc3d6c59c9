// Command auditor checks runseal evidence without trusting the party that
// produced it: it verifies disclosure packages offline, single consistency
// and inclusion proofs, and follows a running log to catch forks and
// rollbacks.
//
// Run "auditor --help" for the commands and the exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
