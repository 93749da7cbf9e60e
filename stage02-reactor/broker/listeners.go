package broker

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

// ListenerOptions are the per-listener seams of a broker (Options.PerListener).
type ListenerOptions struct {
	// TLS gives the TLS configuration of each listener whose security
	// protocol is SSL or SASL_SSL (called once per such listener, in New);
	// a broker with such a listener and no TLS, or a nil *tls.Config, does
	// not start. final builds it from the ssl.* keys (listener.name.<l>.ssl.*
	// overrides included); a test builds one by hand. See Listener.TLS in
	// package network for how a TLS listener is served.
	TLS func(l Listener) (*tls.Config, error)
	// WrapHandler, if set, is called once per listener in New: the
	// listener's requests go to the handler it returns, which calls next
	// (the broker's API table) for those it lets through. final puts its
	// SASL authenticator in front of the SASL_PLAINTEXT and SASL_SSL
	// listeners here; it runs on the handler pool's goroutines, like next.
	WrapHandler func(l Listener, next network.Handler) network.Handler
	// InitialMaxFrameBytes, if set, gives each listener's
	// network.Listener.InitialMaxFrameBytes: the largest request a new
	// connection may send until a handler lifts the bound (0: none but
	// socket.request.max.bytes). final's SASL listeners bound what a client
	// may send before it authenticates (sasl.server.max.receive.size).
	InitialMaxFrameBytes func(l Listener) int32
}

// networkListeners turns the broker's listeners into the network server's,
// with the TLS configuration of the SSL and SASL_SSL ones from
// Options.PerListener.TLS. A Config built by hand, without Listeners, has one
// PLAINTEXT listener on Config.Listener.
func (b *Broker) networkListeners() ([]network.Listener, error) {
	if len(b.cfg.Listeners) == 0 {
		addr := b.cfg.Listener
		if addr == "" {
			addr = b.cfg.Network.Addr
		}
		b.cfg.Listeners = []Listener{{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Addr: addr,
			AdvertisedHost: b.cfg.AdvertisedHost, AdvertisedPort: b.cfg.AdvertisedPort}}
		b.cfg.InterBrokerListener, b.cfg.Listener = "PLAINTEXT", addr
	}
	// A copy: the caller's Config stays as it was.
	b.cfg.Listeners = append([]Listener(nil), b.cfg.Listeners...)
	if b.cfg.InterBrokerListener == "" { // a Config built by hand
		b.cfg.InterBrokerListener = b.cfg.Listeners[0].Name
	}
	out := make([]network.Listener, 0, len(b.cfg.Listeners))
	for _, l := range b.cfg.Listeners {
		nl := network.Listener{Name: l.Name, SecurityProtocol: l.SecurityProtocol, Addr: l.Addr}
		if b.opts.PerListener.InitialMaxFrameBytes != nil {
			nl.InitialMaxFrameBytes = b.opts.PerListener.InitialMaxFrameBytes(l)
		}
		if l.TLS() {
			var err error
			if b.opts.PerListener.TLS != nil {
				nl.TLS, err = b.opts.PerListener.TLS(l)
			}
			if err == nil && nl.TLS == nil {
				err = fmt.Errorf("no TLS configuration (broker.Options.PerListener.TLS gave none)")
			}
			if err != nil {
				return nil, fmt.Errorf("listener %s (%s): %w", l.Name, l.SecurityProtocol, err)
			}
		}
		out = append(out, nl)
	}
	return out, nil
}

// listenerHandler is the network server's handler: the broker's API table,
// behind Options.PerListener.WrapHandler's wrapper for each listener if it
// is set.
func (b *Broker) listenerHandler() network.Handler {
	if b.opts.PerListener.WrapHandler == nil {
		return network.HandlerFunc(b.Handle)
	}
	byName := make(map[string]network.Handler, len(b.cfg.Listeners)) // read-only once built
	for _, l := range b.cfg.Listeners {
		byName[l.Name] = b.opts.PerListener.WrapHandler(l, network.HandlerFunc(b.Handle))
	}
	return network.HandlerFunc(func(r *network.Request) {
		if h, ok := byName[r.Listener]; ok {
			h.Handle(r)
			return
		}
		b.Handle(r) // a request built by hand, without a listener
	})
}

// advertiseChosenPorts: listening on port 0 lets the kernel choose (tests,
// several brokers on one machine); advertise the port it chose.
func (b *Broker) advertiseChosenPorts() {
	for i := range b.cfg.Listeners {
		l := &b.cfg.Listeners[i]
		if l.AdvertisedPort != 0 {
			continue
		}
		if tcp, ok := b.server.ListenerAddr(l.Name).(*net.TCPAddr); ok {
			l.AdvertisedPort = int32(tcp.Port)
		}
		if l.Name == b.cfg.InterBrokerListener {
			b.cfg.AdvertisedPort = l.AdvertisedPort
		}
	}
}

// ListenerAddr is the address the listener named name listens on, or nil.
func (b *Broker) ListenerAddr(name string) net.Addr { return b.server.ListenerAddr(name) }

// AdvertisedListener returns the listener named name, with its advertised
// address (the chosen port filled in).
func (b *Broker) AdvertisedListener(name string) (Listener, bool) {
	for _, l := range b.cfg.Listeners {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

// listenAddrs lists the addresses to listen on, for errors.
func (b *Broker) listenAddrs() string {
	var out []string
	for _, l := range b.cfg.Listeners {
		out = append(out, l.Name+"://"+l.Addr)
	}
	return strings.Join(out, ",")
}

// listenerSummary lists the listeners as they are advertised, for the
// ready line.
func (b *Broker) listenerSummary() string {
	var out []string
	for _, l := range b.cfg.Listeners {
		out = append(out, fmt.Sprintf("%s://%s (%s, listening on %s)", l.Name, l.HostPort(), l.SecurityProtocol, b.ListenerAddr(l.Name)))
	}
	return strings.Join(out, ", ")
}

// Listener is the name of the listener the request came in on; a handler
// answers with that listener's addresses (Metadata, FindCoordinator).
func (r *Request) Listener() string { return r.net.Listener }

// SecurityProtocol is the security protocol of the request's listener.
func (r *Request) SecurityProtocol() string { return r.net.SecurityProtocol }

// TLS is the TLS state of the request's connection (the client's
// certificates), nil on a listener without TLS.
func (r *Request) TLS() *tls.ConnectionState { return r.net.TLS }

// advertisedFor is the broker's advertised host and port for clients of
// listener name: the inter-broker listener's when name is not one of its
// listeners (a request built by hand, in a test).
func (b *Broker) advertisedFor(name string) (string, int32) {
	if l, ok := b.AdvertisedListener(name); ok {
		return l.AdvertisedHost, l.AdvertisedPort
	}
	return b.cfg.AdvertisedHost, b.cfg.AdvertisedPort
}
