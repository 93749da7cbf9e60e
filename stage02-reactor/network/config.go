package network

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrInvalidConfig is wrapped by every error NewServer returns for a bad
// Config.
var ErrInvalidConfig = errors.New("network: invalid config")

// Config holds the settings of a Server. The field comments name the Kafka
// broker key each field stands for; DefaultConfig returns Kafka's defaults.
//
// A zero field takes Kafka's default when the Server is built, so
// Config{Addr: "127.0.0.1:9092"} is a usable configuration.
type Config struct {
	// Addr is the host:port to listen on (Kafka: listeners). Tests use
	// "127.0.0.1:0" and read the chosen port from Server.Addr. With
	// Listeners set, it is ignored (and normalized to the first
	// listener's).
	Addr string

	// Listeners are the server's listeners (Kafka: listeners with
	// listener.security.protocol.map), each with its name, security
	// protocol, address and, for a TLS listener, its tls.Config. Empty
	// means one PLAINTEXT listener on Addr. See Listener.
	Listeners []Listener

	// NumNetworkThreads is the number of Processors (num.network.threads,
	// default 3). Each one owns a set of connections and its own epoll
	// instance (Kafka: its own java.nio Selector).
	NumNetworkThreads int

	// NumIOThreads is the size of the RequestHandlerPool (num.io.threads,
	// default 8): how many requests are handled at the same time.
	NumIOThreads int

	// QueuedMaxRequests bounds the RequestChannel (queued.max.requests,
	// default 500). When it is full, Processors stop reading new requests
	// until handlers make room: back-pressure, nothing is dropped.
	QueuedMaxRequests int

	// QueuedMaxRequestBytes bounds the bytes all requests hold together,
	// from their size prefix until they are answered
	// (queued.max.request.bytes). When it is used up, connections are not
	// read until a request is answered. Kafka's default is -1 (no bound);
	// the workbook's is 256 MiB, so that many connections announcing large
	// requests cannot take the broker's memory. -1: no bound.
	QueuedMaxRequestBytes int64

	// SocketRequestMaxBytes is the largest size prefix accepted
	// (socket.request.max.bytes, default 104857600). A connection that sends
	// a larger or a negative size is closed; the others are not affected.
	SocketRequestMaxBytes int32

	// ConnectionsMaxIdle closes connections that moved no bytes for this
	// long (connections.max.idle.ms, default 600000 ms), even one whose
	// request waits for its answer, as in Kafka. Negative: never close
	// idle connections (Kafka: -1).
	ConnectionsMaxIdle time.Duration

	// MaxConnections limits the open connections of the server
	// (max.connections; Kafka: unlimited). 0 means unlimited. A connection
	// over the limit is accepted and closed at once.
	MaxConnections int

	// SendBufferBytes is SO_SNDBUF of every connection
	// (socket.send.buffer.bytes, default 102400). -1 keeps the OS default.
	SendBufferBytes int

	// ReceiveBufferBytes is SO_RCVBUF (socket.receive.buffer.bytes, default
	// 102400). -1 keeps the OS default. Like Kafka, the reactor sets it on
	// the listening socket so that accepted sockets inherit it before the
	// TCP handshake fixes the window scale.
	ReceiveBufferBytes int

	// RegionSender writes file regions (Send.File) to a connection's socket.
	// nil means CopyRegionSender: read the region into a buffer, write the
	// buffer. Stage 06 plugs in sendfile(2) here. Only the reactor uses it;
	// the portable server copies with io.Copy, and so does every TLS
	// listener (Listener.TLS), which the portable transport serves.
	RegionSender RegionSender

	// Logger receives the server's log lines. nil means slog.Default().
	Logger *slog.Logger
}

// Kafka's defaults, by key.
const (
	defaultNumNetworkThreads     = 3         // num.network.threads
	defaultNumIOThreads          = 8         // num.io.threads
	defaultQueuedMaxRequests     = 500       // queued.max.requests
	defaultSocketRequestMaxBytes = 104857600 // socket.request.max.bytes
	defaultQueuedMaxRequestBytes = 256 << 20 // queued.max.request.bytes (Kafka: -1)
	defaultConnectionsMaxIdle    = 600000 * time.Millisecond
	defaultSocketBufferBytes     = 102400 // socket.send.buffer.bytes, socket.receive.buffer.bytes
)

// DefaultConfig returns a Config with Kafka's defaults, listening on
// 127.0.0.1:9092.
func DefaultConfig() Config {
	return Config{
		Addr:                  "127.0.0.1:9092",
		NumNetworkThreads:     defaultNumNetworkThreads,
		NumIOThreads:          defaultNumIOThreads,
		QueuedMaxRequests:     defaultQueuedMaxRequests,
		QueuedMaxRequestBytes: defaultQueuedMaxRequestBytes,
		SocketRequestMaxBytes: defaultSocketRequestMaxBytes,
		ConnectionsMaxIdle:    defaultConnectionsMaxIdle,
		MaxConnections:        0,
		SendBufferBytes:       defaultSocketBufferBytes,
		ReceiveBufferBytes:    defaultSocketBufferBytes,
	}
}

// normalize fills zero fields with Kafka's defaults and rejects values that
// cannot work.
func (c Config) normalize() (Config, error) {
	d := DefaultConfig()
	if err := c.normalizeListeners(); err != nil {
		return c, err
	}
	if c.NumNetworkThreads == 0 {
		c.NumNetworkThreads = d.NumNetworkThreads
	}
	if c.NumIOThreads == 0 {
		c.NumIOThreads = d.NumIOThreads
	}
	if c.QueuedMaxRequests == 0 {
		c.QueuedMaxRequests = d.QueuedMaxRequests
	}
	if c.QueuedMaxRequestBytes == 0 {
		c.QueuedMaxRequestBytes = d.QueuedMaxRequestBytes
	}
	if c.SocketRequestMaxBytes == 0 {
		c.SocketRequestMaxBytes = d.SocketRequestMaxBytes
	}
	if c.ConnectionsMaxIdle == 0 {
		c.ConnectionsMaxIdle = d.ConnectionsMaxIdle
	}
	if c.SendBufferBytes == 0 {
		c.SendBufferBytes = d.SendBufferBytes
	}
	if c.ReceiveBufferBytes == 0 {
		c.ReceiveBufferBytes = d.ReceiveBufferBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.NumNetworkThreads < 1:
		return c, fmt.Errorf("%w: num.network.threads = %d, want at least 1", ErrInvalidConfig, c.NumNetworkThreads)
	case c.NumIOThreads < 1:
		return c, fmt.Errorf("%w: num.io.threads = %d, want at least 1", ErrInvalidConfig, c.NumIOThreads)
	case c.QueuedMaxRequests < 1:
		return c, fmt.Errorf("%w: queued.max.requests = %d, want at least 1", ErrInvalidConfig, c.QueuedMaxRequests)
	case c.QueuedMaxRequestBytes < -1:
		return c, fmt.Errorf("%w: queued.max.request.bytes = %d, want -1 or more", ErrInvalidConfig, c.QueuedMaxRequestBytes)
	case c.SocketRequestMaxBytes < 1:
		return c, fmt.Errorf("%w: socket.request.max.bytes = %d, want at least 1", ErrInvalidConfig, c.SocketRequestMaxBytes)
	case c.MaxConnections < 0:
		return c, fmt.Errorf("%w: max.connections = %d, want 0 (unlimited) or more", ErrInvalidConfig, c.MaxConnections)
	case c.SendBufferBytes < -1:
		return c, fmt.Errorf("%w: socket.send.buffer.bytes = %d, want -1 or more", ErrInvalidConfig, c.SendBufferBytes)
	case c.ReceiveBufferBytes < -1:
		return c, fmt.Errorf("%w: socket.receive.buffer.bytes = %d, want -1 or more", ErrInvalidConfig, c.ReceiveBufferBytes)
	}
	return c, nil
}
