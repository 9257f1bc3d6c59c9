// Command witness runs a runseal transparency-log witness (C2SP
// tlog-witness): it cosigns the checkpoints of the logs it is configured
// for, only if each is consistent with the last one it cosigned, and keeps
// its state in one SQLite file.
//
// Run "witness --help" for the commands, the default paths and the exit
// codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
