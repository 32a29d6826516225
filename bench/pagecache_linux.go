//go:build linux

package bench

import (
	"fmt"
	"os"
	"syscall"
)

// dropPageCache writes dirty pages back and empties the kernel's page
// cache (and its dentry and inode caches), so that the next reads of any
// file come from the disk. It needs root and affects the whole machine.
func dropPageCache() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("dropping the page cache needs root (uid %d)", os.Geteuid())
	}
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200); err != nil {
		return fmt.Errorf("dropping the page cache: %w", err)
	}
	return nil
}
