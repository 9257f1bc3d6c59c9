package benchjournal

import "time"

// ProcessCPU is the process's user and system CPU time so far; 0 where the
// platform has no per-process CPU clock. Benches subtract two readings to
// report CPU per unit of work, which a busy machine disturbs less than a
// rate.
func ProcessCPU() time.Duration { return processCPU() }
