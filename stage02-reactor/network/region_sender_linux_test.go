package network

import (
	"io"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// sendfileRegionSender is what stage 06 plugs into Config.RegionSender:
// zero-copy with sendfile(2), the page cache straight to the socket (Kafka:
// FileChannel.transferTo). It is here to show that the seam takes a few
// lines, and that the reactor's resumption of partial writes works for it.
type sendfileRegionSender struct {
	calls atomic.Int64 // how often the reactor called it
}

func (s *sendfileRegionSender) SendRegion(sock int, f *os.File, pos, n int64) (int64, error) {
	s.calls.Add(1)
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var written int64
	var serr error
	// Control keeps f's descriptor open while sendfile uses it.
	err = rc.Control(func(fd uintptr) {
		for written < n {
			off := pos + written
			w, err := unix.Sendfile(sock, int(fd), &off, int(min(n-written, 1<<30)))
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return // the socket is full: the reactor calls again on EPOLLOUT
			case err != nil:
				serr = err
				return
			case w == 0:
				serr = io.ErrUnexpectedEOF // the region ends past the end of the file
				return
			}
			written += int64(w)
		}
	})
	if err == nil {
		err = serr
	}
	return written, err
}

func TestRegionSenderSeamTakesSendfile(t *testing.T) {
	sender := &sendfileRegionSender{}
	h := startServer(t, implementation{"reactor", NewReactorServer}, func(c *Config) {
		c.RegionSender = sender
		c.SendBufferBytes = 4096 // many partial writes, many EPOLLOUT resumptions
	})
	c := h.dial()
	for _, r := range [][2]int{{0, 1}, {1000, 100000}, {0, 3 << 20}} {
		c.expect(c.send(opFile, fileArg(int64(r[0]), int64(r[1]))), pattern(r[0], r[1]))
	}
	require.Greater(t, sender.calls.Load(), int64(3), "partial writes should have called the sender again")

	// A region past the end of the file closes the connection.
	c.send(opFile, fileArg(3<<20-10, 20))
	_, _, err := c.recv()
	require.True(t, isClosed(err), "got %v", err)
}

// CopyRegionSender on a full socket: it writes what fits, reports it, and
// finishes the region when called again with the rest.
func TestCopyRegionSenderResumesAfterPartialWrite(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	require.NoError(t, unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096))

	f := patternFile(t, 1<<20)
	const pos, n = 12345, 300000
	var got []byte
	var sent int64
	buf := make([]byte, 64<<10)
	for calls := 0; sent < n; calls++ {
		require.Less(t, calls, 10000, "no progress")
		w, err := CopyRegionSender{}.SendRegion(fds[0], f, pos+sent, n-sent)
		require.NoError(t, err)
		sent += w
		for { // the peer reads what arrived
			r, err := unix.Read(fds[1], buf)
			if err == unix.EAGAIN {
				break
			}
			require.NoError(t, err)
			got = append(got, buf[:r]...)
		}
	}
	require.Equal(t, pattern(pos, n), got)

	_, err = CopyRegionSender{}.SendRegion(fds[0], f, 1<<20-10, 20)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}
