package zktest

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests need no Docker: the proxy is plain TCP, checked against an
// echo server.

// startEcho runs a TCP echo server on 127.0.0.1 until the test ends.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.Copy(conn, conn)
			}()
		}
	}()
	return ln.Addr().String()
}

// silence is how long a test listens to make sure nothing arrives. Only the
// absence of bytes is checked this way; every arrival is waited for with a
// deadline.
const silence = 300 * time.Millisecond

// dial connects to addr and returns a line reader for the connection.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// readLine reads one line within timeout.
func readLine(t *testing.T, conn net.Conn, r *bufio.Reader, timeout time.Duration) (string, error) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(timeout))
	return r.ReadString('\n')
}

func TestProxyForwardsBothWays(t *testing.T) {
	p := StartProxy(t, startEcho(t))
	conn, r := dial(t, p.Addr())

	_, err := io.WriteString(conn, "ping\n")
	require.NoError(t, err)
	line, err := readLine(t, conn, r, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ping\n", line)
}

func TestProxyCutHoldsBytesUntilRestore(t *testing.T) {
	p := StartProxy(t, startEcho(t))
	conn, r := dial(t, p.Addr())
	_, err := io.WriteString(conn, "before\n")
	require.NoError(t, err)
	_, err = readLine(t, conn, r, 5*time.Second)
	require.NoError(t, err)

	p.Cut()
	// The write succeeds, as on a real partition: the bytes sit in buffers.
	_, err = io.WriteString(conn, "during\n")
	require.NoError(t, err)
	requireSilent(t, conn, r)

	// Nothing is lost, and nothing was closed: after Restore the bytes
	// sent during the cut arrive on the same connection.
	p.Restore()
	line, err := readLine(t, conn, r, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "during\n", line)
}

func TestProxyHoldsNewConnectionsWhileCut(t *testing.T) {
	p := StartProxy(t, startEcho(t))
	p.Cut()
	// The connection is accepted (the kernel does that) but goes nowhere.
	conn, r := dial(t, p.Addr())
	_, err := io.WriteString(conn, "hello\n")
	require.NoError(t, err)
	requireSilent(t, conn, r)

	p.Restore()
	line, err := readLine(t, conn, r, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "hello\n", line)
}

func TestProxyClosesClientWhenServerIsDown(t *testing.T) {
	port, err := freePort() // nothing listens there
	require.NoError(t, err)
	p := StartProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	conn, r := dial(t, p.Addr())
	_, err = readLine(t, conn, r, 5*time.Second)
	require.ErrorIs(t, err, io.EOF, "a client of a dead server sees its connection closed")
}

// requireSilent checks that nothing arrives on conn for a while.
func requireSilent(t *testing.T, conn net.Conn, r *bufio.Reader) {
	t.Helper()
	line, err := readLine(t, conn, r, silence)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "read %q through a cut proxy", line)
	require.True(t, ne.Timeout(), "want a read timeout, got %v", err)
}
