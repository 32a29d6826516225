package vfs

import "golang.org/x/sys/windows"

// freeSpace returns the bytes GetDiskFreeSpaceEx says the caller may use.
func freeSpace(dir string) (int64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, err
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, err
	}
	return clampBytes(avail, 1), nil
}
