//go:build !unix

package benchjournal

import "time"

// processCPU is zero where there is no per-process CPU clock.
func processCPU() time.Duration { return 0 }
