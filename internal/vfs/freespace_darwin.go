package vfs

import "golang.org/x/sys/unix"

// freeSpace returns statfs's blocks available to unprivileged users.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return clampBytes(uint64(st.Bavail), uint64(st.Bsize)), nil
}
