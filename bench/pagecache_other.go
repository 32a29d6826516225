//go:build !linux

package bench

import "errors"

// dropPageCache is Linux-only (/proc/sys/vm/drop_caches).
func dropPageCache() error {
	return errors.New("dropping the page cache is only done on Linux")
}
