//go:build unix

package network

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// copyChunk is how much of a region CopyRegionSender reads per write. 64 KiB
// is about what a loopback socket's send buffer takes in one go.
const copyChunk = 64 << 10

// copyBuffers recycles CopyRegionSender's buffers across calls and
// Processors.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// CopyRegionSender is the default RegionSender: it reads the region into a
// buffer (pread, so concurrent senders share one *os.File safely) and writes
// the buffer to the socket. The data crosses into user space and back, the
// copy that zero-copy (stage 06) removes.
//
// When the socket takes only part of a chunk, the rest of the chunk is thrown
// away and read again from the page cache on the next call: that keeps the
// sender stateless, at the price of re-reading at most one chunk per
// EAGAIN.
type CopyRegionSender struct{}

// SendRegion implements RegionSender.
func (CopyRegionSender) SendRegion(sock int, f *os.File, pos, n int64) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp

	var written int64
	for written < n {
		chunk := buf[:min(int64(len(buf)), n-written)]
		r, err := f.ReadAt(chunk, pos+written)
		if r < len(chunk) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the region ends past the end of the file
			}
			return written, fmt.Errorf("read file region at %d: %w", pos+written, err)
		}
		for off := 0; off < len(chunk); {
			w, err := unix.Write(sock, chunk[off:])
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return written, nil // the socket is full: resume on EPOLLOUT
			case err != nil:
				return written, fmt.Errorf("write file region: %w", err)
			}
			short := w < len(chunk)-off
			off += w
			written += int64(w)
			if short {
				// The send buffer is full; another write would only
				// return EAGAIN, so save the system call.
				return written, nil
			}
		}
	}
	return written, nil
}
