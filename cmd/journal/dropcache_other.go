//go:build !linux

package main

import "errors"

// dropPageCache is Linux's only (/proc/sys/vm/drop_caches).
func dropPageCache() error {
	return errors.New("dropping the page cache is done only on Linux")
}
