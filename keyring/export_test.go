package keyring

import "time"

// SetNow sets the clock f judges Revalidate by.
func SetNow(f *File, now func() time.Time) { f.now = now }

// SetSyncHooks replaces f's directory fsync and observes its key links:
// the durability tests order events through them.
func SetSyncHooks(f *File, syncDir func(dir string) error, linked func(path string)) {
	f.syncDir, f.linked = syncDir, linked
}

// SyncWaits reports how many callers wait for a directory fsync: in the
// group being synced or queued for the next.
func SyncWaits(f *File) int { return int(f.waits.Load()) }
