package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
)

// ErrServerClosed is returned by Serve after Shutdown, and by Start after
// Shutdown or a second Start.
var ErrServerClosed = errors.New("network: server closed")

// errNoDescriptor says that an acceptor closed a connection at once for
// want of a file descriptor (see Acceptor.acceptWithSpare).
var errNoDescriptor = errors.New("network: connection closed at accept: no file descriptor left")

// Server is a Kafka-style network server: it reads size-prefixed requests,
// hands them to a Handler through a bounded RequestChannel and a
// RequestHandlerPool, and writes the responses back in request order.
//
// Two transports implement the connection side: the reactor (Acceptor and
// epoll-driven Processors, Linux) and the portable one (a goroutine per
// connection on Go's net package). The RequestChannel, the
// RequestHandlerPool, Stats and the shutdown sequence are shared.
//
// The life of a Server: New…Server listens (so Addr is known at once),
// Start (or Serve) starts the goroutines, Shutdown stops them.
type Server struct {
	cfg       Config              // normalized: no zero fields
	handler   Handler             // the application: Kafka's KafkaApis
	logger    *slog.Logger        // cfg.Logger
	channel   *RequestChannel     // layer 2, shared by both transports
	memory    *memoryPool         // queued.max.request.bytes, shared by both transports
	transport *listenerTransports // a transport per listener: the reactor or the portable connection side

	// openConns counts open connections across the transport; the
	// acceptor compares it with cfg.MaxConnections.
	openConns atomic.Int64

	// mu serializes Start and Shutdown.
	mu sync.Mutex
	// pool is the RequestHandlerPool, nil until Start. Protected by mu.
	pool *RequestHandlerPool
	// started and closing record Start and Shutdown calls. Protected by mu.
	started, closing bool
	// shutdownErr is Shutdown's result, valid once closed is closed.
	shutdownErr error
	// closed is closed when Shutdown has finished.
	closed chan struct{}
}

// transport is the connection side of a Server: the reactor or the portable
// implementation.
type transport interface {
	// addr is the listening address.
	addr() net.Addr
	// start starts accepting and serving connections.
	start()
	// stopAccepting closes the listener and returns once nothing accepts
	// any more; new connections are refused from then on.
	stopAccepting()
	// drain stops reading new requests, closes connections as soon as they
	// have no request in flight and no response left to write, and returns
	// a channel closed when every connection is closed and every
	// connection goroutine has returned.
	drain() <-chan struct{}
	// forceClose closes every connection now and returns once every
	// goroutine of the transport has returned.
	forceClose()
	// counters lists the transport's counters, for Stats.
	counters() []*counters
	// closeListener releases the listener of a server that never started.
	closeListener()
}

// newServer builds the parts every transport shares.
func newServer(cfg Config, h Handler) (*Server, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: nil Handler", ErrInvalidConfig)
	}
	return &Server{
		cfg:     cfg,
		handler: h,
		logger:  cfg.Logger,
		channel: NewRequestChannel(cfg.QueuedMaxRequests),
		memory:  newMemoryPool(cfg.QueuedMaxRequestBytes),
		closed:  make(chan struct{}),
	}, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.transport.addr() }

// Start starts the RequestHandlerPool and the transport's goroutines and
// returns at once. Stop the server with Shutdown.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closing {
		return ErrServerClosed
	}
	s.started = true
	s.pool = NewRequestHandlerPool(s.cfg.NumIOThreads, s.channel, s.handler, s.logger)
	s.transport.start()
	for _, l := range s.cfg.Listeners {
		s.logger.Info("network server started", "listener", l.Name, "security.protocol", l.SecurityProtocol,
			"addr", s.ListenerAddr(l.Name).String(), "tls", l.TLS != nil,
			"num.network.threads", s.cfg.NumNetworkThreads, "num.io.threads", s.cfg.NumIOThreads)
	}
	return nil
}

// Serve starts the server if Start was not called yet, then waits until
// Shutdown has finished and returns ErrServerClosed, like
// http.Server.Serve.
func (s *Server) Serve() error {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		if err := s.Start(); err != nil {
			return err
		}
	}
	<-s.closed
	return ErrServerClosed
}

// Shutdown stops the server gracefully, in Kafka's order: stop accepting
// (new connections are refused), stop reading new requests, let the
// requests in flight finish and their responses be written, close every
// connection, then stop the handlers. Idle connections are closed at once.
//
// If ctx ends first, Shutdown closes every connection at once, dropping the
// responses still to come, and returns ctx.Err(); handlers still running
// then finish in the background. Responses that arrive after Shutdown are
// dropped. Calling Shutdown again waits for the first call and returns its
// result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		select {
		case <-s.closed:
			return s.shutdownErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.closing = true
	started, pool := s.started, s.pool
	s.mu.Unlock()

	defer close(s.closed)
	if !started {
		s.transport.closeListener()
		return nil
	}

	s.transport.stopAccepting()
	select {
	case <-s.transport.drain():
	case <-ctx.Done():
		s.logger.Warn("shutdown deadline passed; closing connections with requests in flight", "err", ctx.Err())
		s.transport.forceClose()
		s.shutdownErr = ctx.Err()
	}
	// Every sender has stopped, so the channel can close: handlers take
	// what is left (answers to closed connections are dropped) and return.
	s.channel.Close()
	if s.shutdownErr == nil {
		select {
		case <-pool.Done():
		case <-ctx.Done():
			s.shutdownErr = ctx.Err()
		}
	}
	s.logger.Info("network server stopped", "addr", s.Addr().String())
	return s.shutdownErr
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	var st Stats
	for _, c := range s.transport.counters() {
		c.addTo(&st)
	}
	st.OpenConnections = s.openConns.Load()
	st.QueueDepth = s.channel.Len()
	st.QueuedRequestBytes = s.memory.inUse()
	st.BuffersRecycled = s.memory.recycled.Load()
	s.mu.Lock()
	pool := s.pool
	s.mu.Unlock()
	if pool != nil {
		st.HandlerIdle = pool.Idle()
	}
	st.InFlight = int64(st.RequestsRead) - int64(st.ResponsesSent) - int64(st.NoResponses) - int64(st.ResponsesDropped)
	return st
}

// connID names a connection the way Kafka's Processor does:
// "localHost:localPort-remoteHost:remotePort-index".
func connID(local, remote net.Addr, index uint64) string {
	return local.String() + "-" + remote.String() + "-" + strconv.FormatUint(index, 10)
}

// logClose logs a connection's end: at Warn when the client broke the
// protocol or I/O failed (Kafka logs these too), at Debug when it is
// ordinary.
func logClose(logger *slog.Logger, id string, reason closeReason, err error) {
	level := slog.LevelDebug
	if reason == closedBadSize || (reason == closedOnError && err != nil) {
		level = slog.LevelWarn
	}
	if !logger.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"conn", id, "reason", reason.String()}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	logger.Log(context.Background(), level, "closing connection", attrs...)
}

// errInvalidReceive is Kafka's InvalidReceiveException: a size prefix that
// is negative or larger than socket.request.max.bytes.
var errInvalidReceive = errors.New("invalid receive")

// checkSize returns errInvalidReceive, worded like Kafka's, if size is not
// an acceptable size prefix.
func checkSize(size, max int32) error {
	switch {
	case size < 0:
		return fmt.Errorf("%w (size = %d)", errInvalidReceive, size)
	case size > max:
		return fmt.Errorf("%w (size = %d larger than %d)", errInvalidReceive, size, max)
	}
	return nil
}
