package main

import (
	"os"
	"syscall"
)

// dropPageCache writes the kernel's dirty pages out and drops its clean
// page cache (and dentries and inodes), so that the next read of any file
// comes from the disk: what a machine just booted has. It needs root.
func dropPageCache() error {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
}
