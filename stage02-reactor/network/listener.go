package network

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// Listener is one of a server's listeners (Kafka: one entry of listeners,
// NAME://host:port): where it listens, its name and security protocol,
// which every request read from it carries, and, for SSL and SASL_SSL, the
// TLS configuration its connections are served through.
//
// A server has one set of Processors per listener, as Kafka's SocketServer
// has an Acceptor and num.network.threads Processors per listener, and one
// RequestChannel, one memory pool and one RequestHandlerPool for all of
// them: num.io.threads and queued.max.requests are the broker's totals,
// whichever listener a request came in on.
type Listener struct {
	// Name is the listener's name (PLAINTEXT, SSL, INTERNAL, ...), unique
	// within a server; Request.Listener carries it.
	Name string

	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// (listener.security.protocol.map). The network layer only carries it
	// to the requests (Request.SecurityProtocol): TLS is switched on by the
	// TLS field, and SASL is the application's affair (a handler in front
	// of the listener's requests).
	SecurityProtocol string

	// Addr is the host:port to listen on; port 0 lets the kernel choose
	// (read it back with Server.ListenerAddr).
	Addr string

	// TLS, when not nil, makes the listener a TLS one: every accepted
	// connection does a TLS handshake (server side) before its first
	// request, and is read and written through it. The reactor reads and
	// writes raw sockets, so a TLS listener is always served by the
	// portable transport (a goroutine per connection over crypto/tls),
	// whichever server was asked for; and file regions of its responses
	// are copied through the TLS record layer, never sent with a
	// RegionSender (sendfile cannot encrypt: Kafka too gives up zero-copy
	// on SSL listeners).
	TLS *tls.Config

	// TLSHandshakeTimeout bounds the TLS handshake of a new connection
	// (0: 10 s, as net/http's). A client that connects and says nothing,
	// or speaks plaintext to a TLS port, is closed by then at the latest.
	TLSHandshakeTimeout time.Duration

	// InitialMaxFrameBytes, when above 0, bounds the requests a new
	// connection of this listener may announce, below
	// socket.request.max.bytes, until a handler lifts the bound for the
	// connection (ConnState.SetMaxFrameBytes). final's SASL listeners set
	// Kafka's sasl.server.max.receive.size here (524288), so that a client
	// that has not authenticated cannot make the broker hold 100 MB per
	// connection (CVE-2022-34917); the gate lifts it on authentication.
	InitialMaxFrameBytes int32
}

// defaultTLSHandshakeTimeout is TLSHandshakeTimeout's default.
const defaultTLSHandshakeTimeout = 10 * time.Second

// normalizeListeners fills Config.Listeners: none means one PLAINTEXT
// listener on Addr. It checks names and addresses, and sets Addr to the
// first listener's.
func (c *Config) normalizeListeners() error {
	if len(c.Listeners) == 0 {
		if c.Addr == "" {
			return fmt.Errorf("%w: listeners (Addr) is empty", ErrInvalidConfig)
		}
		c.Listeners = []Listener{{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Addr: c.Addr}}
		return nil
	}
	ls := make([]Listener, len(c.Listeners)) // the caller's slice stays as it was
	copy(ls, c.Listeners)
	seen := map[string]bool{}
	for i := range ls {
		l := &ls[i]
		switch {
		case l.Name == "":
			return fmt.Errorf("%w: listener %d has no name", ErrInvalidConfig, i)
		case seen[l.Name]:
			return fmt.Errorf("%w: two listeners named %s", ErrInvalidConfig, l.Name)
		case l.Addr == "":
			return fmt.Errorf("%w: listener %s has no address", ErrInvalidConfig, l.Name)
		case l.TLSHandshakeTimeout < 0:
			return fmt.Errorf("%w: listener %s: negative TLS handshake timeout", ErrInvalidConfig, l.Name)
		}
		seen[l.Name] = true
		if l.SecurityProtocol == "" {
			l.SecurityProtocol = "PLAINTEXT"
		}
		if l.TLS != nil && l.TLSHandshakeTimeout == 0 {
			l.TLSHandshakeTimeout = defaultTLSHandshakeTimeout
		}
	}
	c.Listeners = ls
	c.Addr = ls[0].Addr
	return nil
}

// listenerTransports is a server's transports, one per listener, in the
// order of Config.Listeners; it is the Server's transport, doing to every
// listener what the Server asks.
type listenerTransports struct {
	listeners  []*Listener
	transports []transport
}

// newListenerTransports builds a transport per listener with build (the
// reactor's or the portable one), and the portable one for TLS listeners
// whatever build is. If one fails, the listeners already open are closed.
func newListenerTransports(s *Server, build func(s *Server, l *Listener) (transport, error)) (*listenerTransports, error) {
	lt := &listenerTransports{}
	for i := range s.cfg.Listeners {
		l := &s.cfg.Listeners[i]
		b := build
		if l.TLS != nil {
			b = newPortableTransport
		}
		t, err := b(s, l)
		if err != nil {
			lt.closeListener()
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		lt.listeners = append(lt.listeners, l)
		lt.transports = append(lt.transports, t)
	}
	return lt, nil
}

// addr is the first listener's address.
func (lt *listenerTransports) addr() net.Addr { return lt.transports[0].addr() }

// listenerAddr is the address of the listener named name, or nil.
func (lt *listenerTransports) listenerAddr(name string) net.Addr {
	for i, l := range lt.listeners {
		if l.Name == name {
			return lt.transports[i].addr()
		}
	}
	return nil
}

func (lt *listenerTransports) start() {
	for _, t := range lt.transports {
		t.start()
	}
}

func (lt *listenerTransports) stopAccepting() {
	for _, t := range lt.transports {
		t.stopAccepting()
	}
}

// drain drains every listener at once; the channel closes when all are
// drained.
func (lt *listenerTransports) drain() <-chan struct{} {
	dones := make([]<-chan struct{}, 0, len(lt.transports))
	for _, t := range lt.transports {
		dones = append(dones, t.drain())
	}
	done := make(chan struct{})
	go func() {
		for _, d := range dones {
			<-d
		}
		close(done)
	}()
	return done
}

func (lt *listenerTransports) forceClose() {
	for _, t := range lt.transports {
		t.forceClose()
	}
}

func (lt *listenerTransports) counters() []*counters {
	var cs []*counters
	for _, t := range lt.transports {
		cs = append(cs, t.counters()...)
	}
	return cs
}

func (lt *listenerTransports) closeListener() {
	for _, t := range lt.transports {
		t.closeListener()
	}
}

// ListenerAddr returns the address the listener named name listens on, or
// nil if the server has no such listener.
func (s *Server) ListenerAddr(name string) net.Addr { return s.transport.listenerAddr(name) }

// Listeners returns the server's listeners, in the order of
// Config.Listeners (one PLAINTEXT listener on Config.Addr when none were
// given).
func (s *Server) Listeners() []Listener {
	out := make([]Listener, len(s.cfg.Listeners))
	copy(out, s.cfg.Listeners)
	return out
}
