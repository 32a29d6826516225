//go:build windows

package vfs

import (
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapFile maps the file read-only.
//
// Limitation: a Windows file mapping cannot extend past the end of the file
// without growing the file (and a read-only section cannot grow it at all),
// so the view covers min(length, file size) bytes, not length. Callers check
// len(Bytes()) and map again once the file has grown past it; the pager does.
// Writes made with WriteFile show through the view because both go through
// the same system cache.
func mapFile(f *os.File, length int64) (Mapping, error) {
	if _, err := checkMapLength(length); err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := min(length, fi.Size())
	if size <= 0 {
		// CreateFileMapping rejects an empty file; an empty view needs no
		// section.
		return &sysMapping{}, nil
	}
	var addr uintptr
	err = control(f, "CreateFileMapping", func(fd uintptr) error {
		h, err := windows.CreateFileMapping(windows.Handle(fd), nil, windows.PAGE_READONLY,
			uint32(uint64(size)>>32), uint32(uint64(size)), nil)
		if err != nil {
			return err
		}
		// The view keeps the section alive; the handle is not needed after
		// MapViewOfFile either way.
		defer windows.CloseHandle(h)
		addr, err = windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
		return err
	})
	if err != nil {
		return nil, err
	}
	// Converting through a pointer to the uintptr keeps vet's unsafeptr check
	// quiet; the address is not Go-managed memory, so the GC never moves it.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	b := unsafe.Slice((*byte)(base), int(size))
	return &sysMapping{b: b, unmap: unmapView}, nil
}

func unmapView(b []byte) error {
	return windows.UnmapViewOfFile(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// willNeed is a no-op: Windows has PrefetchVirtualMemory, which
// golang.org/x/sys/windows does not wrap; the system's own read-ahead on
// mapped files applies instead.
func willNeed(b []byte, off, end int64) error { return errUnsupported }
