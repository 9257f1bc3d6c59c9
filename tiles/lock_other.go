//go:build !unix

package tiles

// lockFile is a no-op where flock is not available: run one sync per
// directory there.
func lockFile(string) (func(), error) { return func() {}, nil }
