// Package network is the broker's network layer: Kafka's SocketServer, the
// three-layer architecture of the seed's §3.1, built as a reactor on epoll
// (§2.1.1). It reads size-prefixed requests from many connections, hands
// them to a pool of handlers through one bounded queue, and writes each
// response back on the connection it came from, in request order. It knows
// nothing about the Kafka protocol: a request is the bytes of one frame, a
// response a list of byte buffers and file regions.
//
// # The three layers
//
//	clients ──connect──▶ ┌──────────────────────────────────────────┐
//	                     │ Acceptor: 1 goroutine, epoll on the      │ §3.1: the Acceptor thread and
//	                     │ listening socket ("OP_ACCEPT")           │ its OP_ACCEPT selector
//	                     └──────────────────────────────────────────┘
//	                        │ round-robin: new-connection queue + eventfd
//	════ layer 1 ═══════════▼═════════════════════════════════════════════════════════
//	 ┌──────────────────┐ ┌──────────────────┐ ┌──────────────────┐  num.network.threads = 3
//	 │ Processor 0      │ │ Processor 1      │ │ Processor 2      │  each: 1 goroutine, its own
//	 │ epoll + eventfd  │ │ epoll + eventfd  │ │ epoll + eventfd  │  epoll set ("selector") and
//	 │ its connections  │ │ its connections  │ │ its connections  │  connections; reads frames,
//	 └──┬────────────▲──┘ └──┬────────────▲──┘ └──┬────────────▲──┘  writes responses
//	    │ Request    │ response queue + eventfd, one per Processor
//	════ layer 2 ════╪══════════════════════════════════════════════════════════════
//	    ▼            │       ▼            │       ▼            │
//	 ┌─────────────────────────────────────────────────────────┐
//	 │ RequestChannel: one bounded queue (queued.max.requests) │  §3.1: the RequestQueue
//	 └─────────────────────────────────────────────────────────┘
//	════ layer 3 ═══════════╪══════════════════════════════════════════════════════
//	                        ▼                 │ r.Respond(resp): to the request's
//	 ┌──────────────────────────────────────┐ │ own Processor's response queue
//	 │ RequestHandlerPool: num.io.threads   │─┘ §3.1: the ResponseQueues, "one per
//	 │ = 8 goroutines calling Handler       │    Processor thread"
//	 └──────────────────────────────────────┘
//
// The Acceptor accepts, sets the socket options and hands each connection
// to the next Processor. A Processor's loop (processor_linux.go) waits on
// its epoll set; for each readable connection it reads what arrived, parses
// frames (a 4-byte big-endian size, then the request), and puts every
// complete Request on the RequestChannel. A handler goroutine takes it,
// calls the Handler, and the Handler answers with Request.Respond, at once
// or later from any goroutine (a long-poll Fetch in a purgatory). Respond
// puts the response on the response queue of the Processor that read the
// request and wakes that Processor through its eventfd; the Processor
// writes the response, as much as the socket takes, and finishes it when
// epoll reports the socket writable again.
//
// # Kafka's rules
//
//   - Ordering: after reading a request, a Processor mutes the connection
//     (reads nothing more from it) until the response has been written or
//     the handler answered Response.NoResponse (Produce with acks=0). A
//     connection so has one request in flight and gets its responses in
//     request order, although handlers run concurrently. Bytes a client
//     pipelined behind the request wait, already read, until the unmute.
//   - Back-pressure: when the RequestChannel is full, Processors stop
//     reading new requests (nothing is dropped) but keep writing responses.
//   - socket.request.max.bytes: a negative or larger size prefix closes
//     that connection, with a log line; the others are not affected.
//   - connections.max.idle.ms: a connection that moved no bytes for that
//     long is closed, even while its request waits (as in Kafka's
//     Selector); the request's Done channel closes.
//   - max.connections: connections over the limit are closed at accept.
//   - Out of file descriptors (EMFILE): each acceptor holds a spare
//     descriptor, gives it up to accept the waiting connection and, if it
//     cannot take it back, closes that connection at once rather than
//     leave the client waiting in the accept queue.
//   - queued.max.request.bytes: a frame's buffer grows as its bytes
//     arrive, each growth reserved from one pool first, and a request's
//     bytes go back when its handler returns. While the pool is used up,
//     frames wait unread (see memoryPool for why it never deadlocks).
//   - A client that closes while its request waits is closed at once and
//     its request's Done channel closes, so that a long poll does not hold
//     a dead connection for its whole wait.
//
// # Responses that point at files
//
// A Response is a list of Sends, each a byte slice or a region of a file
// (a log segment): a Fetch response can point at the log instead of
// copying it. The reactor writes file regions through a RegionSender; the
// default, CopyRegionSender, reads the region into a buffer and writes it.
// Stage 06 plugs a sendfile(2) RegionSender into Config.RegionSender for
// zero-copy (§2.1.5); region_sender_linux_test.go shows that sender in a
// few lines.
//
// # State per connection
//
// The network layer keeps nothing about a connection's meaning, but it
// gives each connection one slot for the layers above: Request.Conn, a
// ConnState shared by every request of the connection. final's SASL gate
// (package final/security) keeps there whether the connection has
// authenticated and as whom, as Kafka keeps its authenticator on the
// KafkaChannel. One request in flight per connection means the requests
// of a connection take turns with it.
//
// # Two servers
//
// NewReactorServer (Linux) is the reactor above. NewPortableServer runs
// everywhere: Go's net package and one goroutine per connection (read a
// frame, queue it, wait for the response, write it), sharing the
// RequestChannel and RequestHandlerPool. NewServer picks the reactor on
// Linux and the portable server elsewhere or with the build tag portable.
// Every test runs against both, and the benchmarks compare them.
//
// # Listeners
//
// A Server may listen on several named listeners (Config.Listeners,
// Kafka's listeners): an Acceptor and its Processors per listener, one
// RequestChannel, memory pool and RequestHandlerPool for all, and each
// Request names its listener. A TLS listener (Listener.TLS) is always
// served by the portable transport, which does the handshake on the
// connection's goroutine and copies file regions through TLS: the reactor
// reads raw descriptors, and sendfile(2) cannot encrypt.
//
// Go's twist on the reactor: Kafka's Selector blocks its thread in
// epoll_wait. A goroutine that did so would hold an OS thread, and every
// wake-up would cost a kernel thread wake-up plus a trip through the Go
// scheduler. So a poller (poller_linux.go) polls its epoll set without
// blocking, and when nothing is ready parks its goroutine on the Go
// runtime's netpoller, which watches the epoll fd itself. The epoll set,
// the event loop and the wake-ups stay the reactor's own.
//
// # Files, in reading order
//
//	config.go              Config: Kafka's keys and defaults
//	request.go, send.go    Request, Respond, Response, Send, RegionSender
//	wake_list.go           one-shot wake-ups for a resource that frees
//	channel.go             RequestChannel: layer 2
//	memory_pool.go         queued.max.request.bytes; frame buffers that grow
//	handler_pool.go        RequestHandlerPool: layer 3
//	server.go, stats.go    Server: start, shutdown, Stats
//	poller_linux.go        poller: an epoll set and its eventfd
//	acceptor_linux.go      Acceptor
//	processor_linux.go     Processor: the event loop, inbox, back-pressure, idle
//	conn_linux.go          a connection: framing, mute/unmute, partial writes
//	reactor_linux.go       NewReactorServer: the parts put together
//	portable.go            NewPortableServer: a goroutine per connection
//	portable_watch_unix.go how it hears a waiting client leave
//	listener.go            Listener: several listeners, one handler pool
//	portable_tls.go        the TLS handshake of a TLS listener's connection
//	region_sender_unix.go  CopyRegionSender
//	loadgen/               a load generator for benchmarks and brokers: closed loops, or pipelined (Config.InFlight)
package network
