//go:build unix

package server

import "syscall"

// diskSpace is the size of the file system holding dir and the bytes an
// unprivileged writer may still use on it (statfs(2): blocks and
// available blocks, Java's FileStore.getTotalSpace and getUsableSpace).
func diskSpace(dir string) (total, usable int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), nil
}
