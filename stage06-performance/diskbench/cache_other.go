//go:build !linux

package diskbench

import (
	"errors"
	"fmt"
	"os"
)

// Datasync forces the file's data to the device: fsync, the nearest
// call off Linux.
func Datasync(f *os.File) error { return f.Sync() }

// Evict needs posix_fadvise(POSIX_FADV_DONTNEED), which only Linux has
// here: elsewhere it returns errors.ErrUnsupported.
func Evict(path string) error {
	return fmt.Errorf("evict %s: %w", path, errors.ErrUnsupported)
}

// Resident is implemented on Linux only; elsewhere it returns
// errors.ErrUnsupported.
func Resident(path string) (resident, size int64, err error) {
	return 0, 0, fmt.Errorf("resident %s: %w", path, errors.ErrUnsupported)
}
