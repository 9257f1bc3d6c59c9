package keyring

import "time"

// SetNow sets the clock f judges Revalidate by.
func SetNow(f *File, now func() time.Time) { f.now = now }
