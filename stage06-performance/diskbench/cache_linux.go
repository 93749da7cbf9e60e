//go:build linux

package diskbench

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Datasync is fdatasync(2): the file's data, and only the metadata needed
// to read it back (its size, not its times), reaches the device.
func Datasync(f *os.File) error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("fdatasync %s: %w", f.Name(), err)
	}
	return nil
}

// Evict drops the file's pages from the page cache (§2.1.3): fdatasync
// first, since a dirty page cannot be dropped, then
// posix_fadvise(POSIX_FADV_DONTNEED) over the whole file. Pages that a
// process has mapped stay (commitlog maps its indexes): Resident tells.
func Evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("evict: %w", err)
	}
	defer f.Close()
	if err := Datasync(f); err != nil {
		return fmt.Errorf("evict: %w", err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evict %s: fadvise: %w", path, err)
	}
	return nil
}

// Resident reports how many bytes of the file are in the page cache, by
// page (mincore(2) over a mapping of the file, which faults nothing in),
// and the file's size rounded up to whole pages.
func Resident(path string) (resident, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("resident: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("resident: %w", err)
	}
	if fi.Size() == 0 {
		return 0, 0, nil
	}
	page := int64(os.Getpagesize())
	pages := (fi.Size() + page - 1) / page
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, fmt.Errorf("resident %s: mmap: %w", path, err)
	}
	defer unix.Munmap(data)
	vec := make([]byte, pages)
	if err := mincore(data, vec); err != nil {
		return 0, 0, fmt.Errorf("resident %s: mincore: %w", path, err)
	}
	for _, v := range vec {
		if v&1 != 0 {
			resident += page
		}
	}
	return resident, pages * page, nil
}

// mincore is mincore(2), which golang.org/x/sys/unix has for the BSDs but
// not for Linux: one byte per page of b, bit 0 set when the page is in
// memory.
func mincore(b, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return errno
	}
	return nil
}
