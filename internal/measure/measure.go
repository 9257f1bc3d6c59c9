// Package measure gates the tests that assert what the machine decides
// rather than what runseal's code does: pages in the kernel's page cache,
// resident memory, wall or CPU time. Such a figure changes with other
// processes, memory pressure and the file system, so a default test run
// (go test ./..., scripts/test.sh) never asserts one; the default tests
// assert what the code controls (the pages it asked for, the connection
// it read through, the bytes it kept), and these measurements run only
// when asked for, with RUNSEAL_MEASURE=1, on a quiet machine.
package measure

import (
	"os"
	"testing"
)

// Env is the environment variable that turns the measurements on.
const Env = "RUNSEAL_MEASURE"

// Enabled reports whether the measurements were asked for.
func Enabled() bool { return os.Getenv(Env) == "1" }

// Only skips t unless the measurements were asked for, saying what it
// would have measured.
func Only(t testing.TB, what string) {
	t.Helper()
	if !Enabled() {
		t.Skipf("measures %s, which the machine decides; set %s=1 to run it", what, Env)
	}
}
