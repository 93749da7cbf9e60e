package network

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// A connection that breaks the framing is closed, with a log line; the
// other connections, even on the same Processor, do not notice.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	const maxBytes = 1024
	for _, tc := range []struct {
		name   string
		frame  []byte
		hangUp bool // the client closes after writing frame
		reason func(Stats) uint64
	}{
		{
			name:   "negative size",
			frame:  binary.BigEndian.AppendUint32(nil, 0xffffff00),
			reason: func(s Stats) uint64 { return s.ClosedBadSize },
		},
		{
			name:   "size over socket.request.max.bytes",
			frame:  append(binary.BigEndian.AppendUint32(nil, maxBytes+1), make([]byte, 100)...),
			reason: func(s Stats) uint64 { return s.ClosedBadSize },
		},
		{
			// An HTTP client knocking on the Kafka port: "GET " is a size
			// of 1195725856.
			name:   "garbage",
			frame:  []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
			reason: func(s Stats) uint64 { return s.ClosedBadSize },
		},
		{
			name:   "frame cut in the middle",
			frame:  append(binary.BigEndian.AppendUint32(nil, 100), make([]byte, 10)...),
			hangUp: true,
			reason: func(s Stats) uint64 { return s.ClosedByPeer },
		},
		{
			name:   "size prefix cut in the middle",
			frame:  []byte{0, 0},
			hangUp: true,
			reason: func(s Stats) uint64 { return s.ClosedByPeer },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachImplementation(t, func(t *testing.T, impl implementation) {
				h := startServer(t, impl, func(c *Config) {
					c.SocketRequestMaxBytes = maxBytes
					c.NumNetworkThreads = 1 // the good and the bad share a Processor
				})
				good := h.dial()
				good.roundTrip()

				bad := h.dial()
				bad.roundTrip() // a good start does not make it a good connection
				bad.write(tc.frame)
				if tc.hangUp {
					require.NoError(t, bad.nc.Close())
				} else {
					bad.expectClosed()
				}
				h.stats("the bad connection to be closed for its reason", func(st Stats) bool {
					return tc.reason(st) == 1 && st.OpenConnections == 1
				})
				good.roundTrip()
				good.roundTrip()
			})
		})
	}
}

// A frame of exactly socket.request.max.bytes is fine.
func TestFrameOfMaxSizeIsAccepted(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		const maxBytes = 64 << 10
		h := startServer(t, impl, func(c *Config) { c.SocketRequestMaxBytes = maxBytes })
		c := h.dial()
		arg := pattern(0, maxBytes-5) // + correlation id + op = maxBytes
		c.expect(c.send(opEcho, arg), arg)
	})
}
