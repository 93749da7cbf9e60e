package network

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestAtTheDescriptorLimitANewClientIsClosedAtOnce: when the process has no
// descriptor left, accept fails with EMFILE and the connection stays in
// the kernel's accept queue. Kafka's Acceptor logs the error and tries
// again, and the client waits, unserved and unanswered, until a descriptor
// frees up. Here the Acceptor gives up a descriptor it holds in reserve,
// accepts the connection and closes it at once, as it closes one over
// max.connections, and takes its reserve back: the client learns within a
// second that it must try later. Once descriptors free up, new clients
// are served. Before the spare descriptor, the client's read waited out
// its deadline on both servers (the reactor paused and retried every
// 100 ms, the portable server backed off up to a second).
//
// The test lowers the process's soft RLIMIT_NOFILE to just above the
// descriptors in use and fills the rest, so it must not run alongside
// other tests (none in this package call t.Parallel).
func TestAtTheDescriptorLimitANewClientIsClosedAtOnce(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		h.dial().roundTrip()
		before := h.srv.Stats().RejectedConnections

		release := exhaustDescriptors(t)
		nc, err := net.DialTimeout("tcp", h.addr, waitFor) // takes the one descriptor left
		require.NoError(t, err)
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(time.Second)))
		var b [1]byte
		n, err := nc.Read(b[:])
		nc.Close()
		release()
		require.Zero(t, n)
		require.True(t, isClosed(err), "want EOF or reset within a second, got %v", err)
		require.Greater(t, h.srv.Stats().RejectedConnections, before, "counted as rejected")

		h.dial().roundTrip() // descriptors are back: served again
		require.Equal(t, int64(2), h.srv.Stats().OpenConnections, "the two served clients, and not the one closed at accept")
	})
}

// exhaustDescriptors lowers the soft limit on open files to a little above
// the highest descriptor in use, opens /dev/null until no descriptor is
// left, then closes one of them: the next descriptor this process opens
// is the last. release closes the others and restores the limit; the
// test's cleanup calls it too, in case the test fails first.
func exhaustDescriptors(t *testing.T) (release func()) {
	t.Helper()
	var orig unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &orig))
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	highest := 0
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			highest = max(highest, fd)
		}
	}
	lowered := orig
	lowered.Cur = uint64(highest + 64)
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lowered))
	var fillers []int
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		for _, fd := range fillers {
			unix.Close(fd)
		}
		require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &orig))
	}
	t.Cleanup(release)
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EMFILE {
			break
		}
		require.NoError(t, err)
		fillers = append(fillers, fd)
	}
	require.NotEmpty(t, fillers)
	unix.Close(fillers[len(fillers)-1])
	fillers = fillers[:len(fillers)-1]
	return release
}
