package zerocopy

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

// build 06.H: sendfile(2): a file region to a socket, resumable across partial writes
// tests: TestSendfileWritesTheRegionAcrossPartialWrites, TestSendfilePastTheEndOfTheFileIsAnError

// maxChunk bounds one sendfile call: Linux moves at most 0x7ffff000 bytes
// a call anyway, and a loopback socket takes far less before it would
// block.
const maxChunk = 1 << 30

// SendfileRegionSender is a network.RegionSender that writes file regions
// with sendfile(2). It keeps no state: the reactor resumes a region the
// socket could not take whole (EAGAIN) on its next EPOLLOUT.
type SendfileRegionSender struct{}

var _ network.RegionSender = SendfileRegionSender{}

// SendRegion implements network.RegionSender.
func (SendfileRegionSender) SendRegion(sock int, f *os.File, pos, n int64) (int64, error) {
	// exercise 06.5: send a file region to a socket with sendfile(2), resumably
	// hint: the socket is non-blocking, so a full socket is a normal answer, not an error; sendfile moves a bounded chunk a call and may be interrupted
	// tests: TestSendfileWritesTheRegionAcrossPartialWrites, TestSendfilePastTheEndOfTheFileIsAnError
	fd := int(f.Fd())
	var written int64
	for written < n {
		off := pos + written
		w, err := unix.Sendfile(sock, fd, &off, int(min(n-written, maxChunk)))
		if w > 0 {
			written += int64(w)
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return written, nil // the socket is full: resume on EPOLLOUT
		case err != nil:
			return written, fmt.Errorf("sendfile at %d: %w", pos+written, err)
		case w == 0:
			// Nothing moved and no error: the region ends past the end
			// of the file (a segment truncated under a response).
			return written, fmt.Errorf("sendfile at %d: %w", pos+written, io.ErrUnexpectedEOF)
		}
	}
	return written, nil
	// end exercise
}

// Zero reports whether Default sends without copying: on Linux.
const Zero = true

// Default is the sender a broker uses unless it asks for copies:
// sendfile(2) on Linux.
func Default() network.RegionSender { return SendfileRegionSender{} }

// end build
