//go:build !amd64 || purego

package canon

// plainLen is plainLenGeneric where no vector version exists.
func plainLen(s []byte) int { return plainLenGeneric(s) }
