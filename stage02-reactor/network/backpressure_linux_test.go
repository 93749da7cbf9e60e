package network

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A request that waits in its Processor for room in the RequestChannel
// belongs to a client that may leave meanwhile. The reactor hears the close
// (the connection is muted, so EPOLLRDHUP ends it) and, when the channel has
// room, releases that request instead of handing it to a handler: nobody
// would read the answer. (The portable server's goroutine waits inside
// RequestChannel.Send and does not hear the close, so this is the reactor's
// alone.)
func TestARequestWaitingForTheChannelIsDroppedWhenItsClientLeaves(t *testing.T) {
	h := startServer(t, implementation{"reactor", NewReactorServer}, func(c *Config) {
		c.QueuedMaxRequests = 1
		c.NumIOThreads = 1
		c.NumNetworkThreads = 1 // one Processor, so one queue of pending requests
	})
	busy, queued, leaving, last := h.dial(), h.dial(), h.dial(), h.dial()

	gated := busy.send(opGate, []byte("gated"))
	h.stats("the handler to hold the gated request", func(st Stats) bool {
		return st.RequestsRead == 1 && st.QueueDepth == 0
	})
	inChannel := queued.send(opEcho, []byte("queued"))
	h.stats("the channel to be full", func(st Stats) bool { return st.QueueDepth == 1 })
	leaving.send(opHold, nil)
	h.stats("the leaving client's request to wait in the Processor", func(st Stats) bool {
		return st.RequestsRead == 3 && st.BackPressure == 1
	})
	require.NoError(t, leaving.nc.Close())
	h.stats("the leaving client's connection to be closed", func(st Stats) bool {
		return st.OpenConnections == 3
	})
	behind := last.send(opEcho, []byte("last")) // waits behind the departed one

	h.openGate()
	busy.expect(gated, []byte("gated"))
	queued.expect(inChannel, []byte("queued"))
	last.expect(behind, []byte("last"))
	// One handler takes requests in order: the last one was handled, so
	// the departed client's request, queued before it, never reached it.
	require.Empty(t, h.held, "a handler was given the request of a client that had left")
	h.stats("its bytes to be released", func(st Stats) bool {
		return st.QueuedRequestBytes == 0 && st.InFlight == 0
	})
}
