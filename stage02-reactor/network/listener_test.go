package network

import (
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage02-reactor/tlstest"
)

// failingRegionSender fails the test if it is ever called: a TLS listener
// must copy file regions through TLS, never hand them to a RegionSender.
type failingRegionSender struct{ t *testing.T }

func (s failingRegionSender) SendRegion(int, *os.File, int64, int64) (int64, error) {
	s.t.Error("a RegionSender was called for a TLS connection")
	return 0, os.ErrInvalid
}

// twoListeners configures a PLAINTEXT listener and a TLS one named SSL.
func twoListeners(t *testing.T, pki *tlstest.PKI, handshake time.Duration) func(*Config) {
	return func(c *Config) {
		c.Listeners = []Listener{
			{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SSL", SecurityProtocol: "SSL", Addr: "127.0.0.1:0", TLS: pki.ServerConfig(tls.NoClientCert),
				TLSHandshakeTimeout: handshake},
		}
		c.RegionSender = failingRegionSender{t}
	}
}

// dialTLS opens a TLS connection to a listener.
func (h *harness) dialTLS(addr string, cfg *tls.Config) *client {
	h.t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: waitFor}, "tcp", addr, cfg)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { nc.Close() })
	return &client{t: h.t, nc: nc}
}

// Every request carries the name and security protocol of the listener
// it came in on, and its TLS state on a TLS listener; both listeners
// feed the one handler pool.
func TestRequestsCarryTheirListener(t *testing.T) {
	pki := tlstest.New(t)
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, twoListeners(t, pki, 0))
		require.Equal(t, h.srv.ListenerAddr("PLAINTEXT"), h.srv.Addr())
		require.Nil(t, h.srv.ListenerAddr("INTERNAL"))
		require.Len(t, h.srv.Listeners(), 2)

		plain := h.dial()
		plain.expect(plain.send(opListener, nil), []byte("PLAINTEXT/PLAINTEXT/false"))
		secure := h.dialTLS(h.srv.ListenerAddr("SSL").String(), pki.ClientConfig(""))
		secure.expect(secure.send(opListener, nil), []byte("SSL/SSL/true"))
		secure.roundTrip()
		h.stats("both listeners' requests counted", func(s Stats) bool { return s.ResponsesSent == 3 && s.OpenConnections == 2 })
	})
}

// File regions reach a TLS client whole, copied through TLS (the
// RegionSender, sendfile's seam, is never called), interleaved with
// buffers as they were sent.
func TestTLSListenerCopiesFileRegions(t *testing.T) {
	pki := tlstest.New(t)
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, twoListeners(t, pki, 0))
		c := h.dialTLS(h.srv.ListenerAddr("SSL").String(), pki.ClientConfig(""))
		for _, region := range [][2]int64{{0, 100}, {12345, 1 << 20}, {3<<20 - 7, 7}} {
			c.expect(c.send(opFile, fileArg(region[0], region[1])), pattern(int(region[0]), int(region[1])))
		}
	})
}

// A client that connects to a TLS listener and says nothing is closed
// after the handshake timeout; so is one that speaks plaintext there.
// Neither disturbs the other listener.
func TestTLSHandshakeFailuresCloseTheConnection(t *testing.T) {
	pki := tlstest.New(t)
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, twoListeners(t, pki, 200*time.Millisecond))
		sslAddr := h.srv.ListenerAddr("SSL").String()
		silent, err := net.DialTimeout("tcp", sslAddr, waitFor)
		require.NoError(t, err)
		defer silent.Close()
		(&client{t: t, nc: silent}).expectClosed()

		plaintext, err := net.DialTimeout("tcp", sslAddr, waitFor)
		require.NoError(t, err)
		defer plaintext.Close()
		pc := &client{t: t, nc: plaintext}
		pc.send(opEcho, []byte("not TLS"))
		require.NoError(t, plaintext.SetReadDeadline(time.Now().Add(waitFor)))
		_, _, err = pc.recv() // a TLS alert at most, never an answer
		require.Error(t, err)
		h.stats("both closed", func(s Stats) bool { return s.OpenConnections == 0 })

		plain := h.dial()
		plain.roundTrip()
	})
}

// Listener names must be distinct.
func TestListenersNeedDistinctNames(t *testing.T) {
	cfg := testConfig()
	cfg.Listeners = []Listener{{Name: "A", Addr: "127.0.0.1:0"}, {Name: "A", Addr: "127.0.0.1:0"}}
	_, err := NewPortableServer(cfg, HandlerFunc(func(*Request) {}))
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "two listeners named A")
}
