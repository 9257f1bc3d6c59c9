// Command journal is the operator CLI for a runseal journal: it creates a
// journal file, appends records, reads and lists runs, verifies chains,
// manages leases, seals and cancels runs, and benchmarks the store.
//
// Run "journal --help" for the commands, the default journal path and the
// exit codes.
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
