//go:build linux

package network

import (
	"net"
)

// NewReactorServer returns a Server, listening on cfg.Addr, built as Kafka's
// SocketServer: one Acceptor, cfg.NumNetworkThreads Processors each with its
// own epoll instance, the shared RequestChannel and RequestHandlerPool.
// Linux only.
func NewReactorServer(cfg Config, h Handler) (*Server, error) {
	s, err := newServer(cfg, h)
	if err != nil {
		return nil, err
	}
	r := &reactor{}
	for i := 0; i < s.cfg.NumNetworkThreads; i++ {
		p, err := newProcessor(i, s)
		if err != nil {
			r.closePollers()
			return nil, err
		}
		r.processors = append(r.processors, p)
	}
	r.acceptor, err = newAcceptor(s, r.processors)
	if err != nil {
		r.closePollers()
		return nil, err
	}
	s.transport = r
	return s, nil
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
