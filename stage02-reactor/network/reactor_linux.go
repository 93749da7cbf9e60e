//go:build linux

package network

import (
	"net"
)

// NewReactorServer returns a Server, listening on cfg.Addr (or on each of
// cfg.Listeners), built as Kafka's SocketServer: per listener one Acceptor
// and cfg.NumNetworkThreads Processors each with its own epoll instance;
// one RequestChannel and RequestHandlerPool for all. A TLS listener is
// served by the portable transport (see Listener.TLS). Linux only.
func NewReactorServer(cfg Config, h Handler) (*Server, error) {
	s, err := newServer(cfg, h)
	if err != nil {
		return nil, err
	}
	if s.transport, err = newListenerTransports(s, newReactorTransport); err != nil {
		return nil, err
	}
	return s, nil
}

// newReactorTransport builds listener l's Acceptor and Processors.
func newReactorTransport(s *Server, l *Listener) (transport, error) {
	r := &reactor{}
	for i := 0; i < s.cfg.NumNetworkThreads; i++ {
		p, err := newProcessor(i, s, l)
		if err != nil {
			r.closePollers()
			return nil, err
		}
		r.processors = append(r.processors, p)
	}
	var err error
	r.acceptor, err = newAcceptor(s, l, r.processors)
	if err != nil {
		r.closePollers()
		return nil, err
	}
	return r, nil
}

// reactor is the Acceptor + Processors transport.
type reactor struct {
	acceptor   *Acceptor
	processors []*Processor
}

func (r *reactor) addr() net.Addr { return r.acceptor.addr }

func (r *reactor) start() {
	for _, p := range r.processors {
		go p.run()
	}
	go r.acceptor.run()
}

func (r *reactor) stopAccepting() { r.acceptor.stop() }

// drain orders every Processor to drain; the channel closes when all have
// stopped.
func (r *reactor) drain() <-chan struct{} {
	for _, p := range r.processors {
		p.order(false)
	}
	done := make(chan struct{})
	go func() {
		for _, p := range r.processors {
			<-p.done
		}
		close(done)
	}()
	return done
}

func (r *reactor) forceClose() {
	for _, p := range r.processors {
		p.order(true)
	}
	for _, p := range r.processors {
		<-p.done
	}
}

func (r *reactor) counters() []*counters {
	cs := []*counters{&r.acceptor.stats}
	for _, p := range r.processors {
		cs = append(cs, &p.stats)
	}
	return cs
}

// closeListener releases the sockets of a server that never started.
func (r *reactor) closeListener() {
	r.acceptor.closeSockets()
	r.closePollers()
}

// closePollers closes the Processors' pollers when their goroutines never
// ran.
func (r *reactor) closePollers() {
	for _, p := range r.processors {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.poller.close()
	}
}
