package zerocopy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// socketPair returns a non-blocking sending end with a small send buffer,
// so that a region does not fit at once, and the receiving end as a file.
func socketPair(t *testing.T) (send int, recv *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	require.NoError(t, unix.SetNonblock(fds[0], true))
	require.NoError(t, unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10))
	recv = os.NewFile(uintptr(fds[1]), "recv")
	t.Cleanup(func() { unix.Close(fds[0]); recv.Close() })
	return fds[0], recv
}

// TestSendfileWritesTheRegionAcrossPartialWrites: a 4 MiB region of a
// file reaches the other end byte for byte through a socket that takes a
// few KiB at a time: each call returns what the socket took, and the
// caller resumes from there, as the reactor does on EPOLLOUT.
func TestSendfileWritesTheRegionAcrossPartialWrites(t *testing.T) {
	data := make([]byte, 6<<20)
	_, _ = rand.Read(data)
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sock, recv := socketPair(t)

	pos, n := int64(1<<20)+7, int64(4<<20)
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(recv, n))
		got <- b
	}()
	var sent int64
	calls, partial := 0, 0
	for sent < n {
		w, err := SendfileRegionSender{}.SendRegion(sock, f, pos+sent, n-sent)
		require.NoError(t, err)
		calls++
		if w < n-sent {
			partial++
			var fds unix.FdSet
			fds.Set(sock)
			_, err := unix.Select(sock+1, nil, &fds, nil, nil) // wait until writable, as on EPOLLOUT
			require.NoError(t, err)
		}
		sent += w
	}
	require.True(t, bytes.Equal(data[pos:pos+n], <-got), "the region arrives byte for byte")
	require.Positive(t, partial, "the small send buffer made some calls partial")
	t.Logf("%d calls, %d partial", calls, partial)
}

// TestSendfilePastTheEndOfTheFileIsAnError: a region that ends past the
// end of its file (a segment truncated under a response) is an error,
// which closes the connection, not a silent short response.
func TestSendfilePastTheEndOfTheFileIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "short.log")
	require.NoError(t, os.WriteFile(path, []byte("0123456789"), 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sock, recv := socketPair(t)
	go io.Copy(io.Discard, recv)
	type result struct {
		w   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		w, err := SendfileRegionSender{}.SendRegion(sock, f, 4, 100)
		done <- result{w, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("SendRegion did not return: sendfile moves 0 bytes past the end of the file, and a loop must stop there")
	}
	require.Equal(t, int64(6), r.w, "what the file holds is written")
	require.True(t, errors.Is(r.err, io.ErrUnexpectedEOF), "%v", r.err)
}
