//go:build !unix

package main

import (
	"os"
	"time"
)

// childUsage is not measured here; bench reports no peak RSS.
func childUsage(*os.ProcessState) (int64, time.Duration) { return 0, 0 }

func threadCPU() time.Duration { return 0 }

func selfRSS() int64 { return 0 }
