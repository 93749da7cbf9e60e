//go:build linux

package network

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// build 02.B: the acceptor: accept, prepare the socket, hand it round-robin to a processor
// tests: TestOneRoundTrip, TestMaxConnections, TestAtTheDescriptorLimitANewClientIsClosedAtOnce

// Acceptor is the entry of §3.1: one goroutine that waits for OP_ACCEPT on
// the listening socket (here: EPOLLIN in its own epoll set), accepts,
// prepares each socket (non-blocking, TCP_NODELAY, SO_KEEPALIVE, SO_SNDBUF)
// and hands it round-robin to a Processor, through the Processor's
// new-connection queue plus a wake-up. It reads and writes nothing.
type Acceptor struct {
	srv        *Server       // config and openConns (max.connections)
	lfd        int           // the listening socket, non-blocking
	addr       net.Addr      // the address lfd is bound to
	poller     *poller       // lfd and the stop wake-up
	processors []*Processor  // where connections go
	logger     *slog.Logger  // tagged with the listener
	stats      counters      // accepted and rejected connections
	done       chan struct{} // closed when run returns

	// The fields below belong to the Acceptor's goroutine.

	next      int          // round-robin position in processors
	nextIndex uint64       // the next connection's ConnID index
	local     *net.TCPAddr // the last local address seen, shared by connections that have it
	// spare is a descriptor (/dev/null) held in reserve for when the
	// process runs out: see shed. -1 while another part of the process
	// holds the number it gave up.
	spare int
	// shedding is set while connections are being closed for want of a
	// descriptor, so that the warning is logged once per episode.
	shedding bool

	// mu protects stopping and exited.
	mu sync.Mutex
	// stopping is Shutdown's order to stop. Protected by mu.
	stopping bool
	// exited is set once run has returned and the poller is closed: stop
	// must not write to its eventfd any more. Protected by mu.
	exited bool
}

// newAcceptor creates listener l's listening socket and the Acceptor's
// poller.
func newAcceptor(srv *Server, l *Listener, processors []*Processor) (*Acceptor, error) {
	lfd, err := listen(l.Addr, srv.cfg.ReceiveBufferBytes)
	if err != nil {
		return nil, fmt.Errorf("network: listen on %s: %w", l.Addr, err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		unix.Close(lfd)
		return nil, fmt.Errorf("network: getsockname: %w", err)
	}
	pl, err := openPoller()
	if err != nil {
		unix.Close(lfd)
		return nil, fmt.Errorf("network: %w", err)
	}
	if err := pl.add(lfd, epollIn); err != nil {
		pl.close()
		unix.Close(lfd)
		return nil, fmt.Errorf("network: %w", err)
	}
	spare, err := openSpare()
	if err != nil {
		pl.close()
		unix.Close(lfd)
		return nil, fmt.Errorf("network: %w", err)
	}
	return &Acceptor{
		srv:        srv,
		lfd:        lfd,
		addr:       sockaddrToTCP(sa),
		poller:     pl,
		processors: processors,
		logger:     srv.logger.With("acceptor", l.Addr, "listener", l.Name),
		done:       make(chan struct{}),
		spare:      spare,
	}, nil
}

// openSpare opens the descriptor an Acceptor holds in reserve.
func openSpare() (int, error) {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the spare descriptor: %w", err)
	}
	return fd, nil
}

// listen creates a non-blocking listening socket. socket.receive.buffer.bytes
// is set here, before listen, because an accepted socket inherits it and
// TCP fixes the window scale during the handshake, before accept returns.
func listen(addr string, rcvbuf int) (int, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return -1, err
	}
	family, sa := unix.AF_INET, unix.Sockaddr(&unix.SockaddrInet4{Port: ta.Port})
	if ip4 := ta.IP.To4(); ip4 != nil {
		sa.(*unix.SockaddrInet4).Addr = [4]byte(ip4)
	} else if ta.IP != nil {
		sa6 := &unix.SockaddrInet6{Port: ta.Port, Addr: [16]byte(ta.IP.To16())}
		if ta.Zone != "" {
			ifi, err := net.InterfaceByName(ta.Zone)
			if err != nil {
				return -1, err
			}
			sa6.ZoneId = uint32(ifi.Index)
		}
		family, sa = unix.AF_INET6, sa6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if err := setupListener(fd, sa, rcvbuf); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func setupListener(fd int, sa unix.Sockaddr, rcvbuf int) error {
	// SO_REUSEADDR lets a restarted broker bind while old connections sit
	// in TIME_WAIT, as Go's net package and Java do.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fmt.Errorf("setsockopt SO_REUSEADDR: %w", err)
	}
	if rcvbuf > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
			return fmt.Errorf("setsockopt SO_RCVBUF: %w", err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(fd, listenBacklog()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return nil
}

// listenBacklog is the kernel's maximum accept queue (net.core.somaxconn),
// what Go's net package uses too, so that both servers absorb a burst of
// connections alike. (Kafka 3.2 added socket.listen.backlog.size, default
// 50.)
func listenBacklog() int {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		return unix.SOMAXCONN
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || n < 1 {
		return unix.SOMAXCONN
	}
	return min(n, 1<<16-1)
}

// run is the Acceptor's loop.
func (a *Acceptor) run() {
	defer a.exit()
	events := make([]unix.EpollEvent, 2)
	for {
		n, err := a.poller.wait(events, -1)
		if err != nil {
			a.logger.Error("acceptor stopping", "err", err)
			return
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) == a.poller.efd {
				if err := a.poller.clearWake(); err != nil {
					a.logger.Error("clearing the wake-up eventfd", "err", err)
				}
				if a.isStopping() {
					return
				}
				continue
			}
			a.acceptAll()
		}
	}
}

// acceptAll accepts until the accept queue is empty.
func (a *Acceptor) acceptAll() {
	for {
		fd, sa, err := unix.Accept4(a.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err == unix.EMFILE || err == unix.ENFILE {
			fd, sa, err = a.acceptWithSpare(err)
		}
		switch err {
		case nil:
		case unix.EAGAIN:
			return // the queue is empty
		case errNoDescriptor:
			continue // closed at once; the next may find a descriptor
		case unix.EINTR, unix.ECONNABORTED, unix.EPERM, unix.EPROTO, unix.ENETDOWN, unix.ENOPROTOOPT,
			unix.EHOSTDOWN, unix.ENONET, unix.EHOSTUNREACH, unix.EOPNOTSUPP, unix.ENETUNREACH:
			// The client gave up while in the queue (ECONNABORTED), a
			// firewall refused it (EPERM), or one of the network errors
			// accept(2) says to treat like EAGAIN and retry.
			continue
		default:
			// Out of descriptors with no spare to give up (EMFILE,
			// ENFILE), out of memory (ENOBUFS, ENOMEM), or something
			// unexpected. The listening socket stays readable, so going
			// back to epoll would spin: pause, and let Shutdown's wake-up
			// cut the pause short.
			a.logger.Warn("accept failed; pausing", "err", err)
			a.pause(100 * time.Millisecond)
			return
		}
		a.shedding = false
		a.stats.accepted.Add(1)
		if max := a.srv.cfg.MaxConnections; max > 0 && a.srv.openConns.Load() >= int64(max) {
			a.stats.rejected.Add(1)
			a.logger.Debug("rejecting connection: max.connections reached", "max.connections", max)
			unix.Close(fd)
			continue
		}
		p := a.processors[a.next]
		a.next = (a.next + 1) % len(a.processors)
		c, err := a.prepare(fd, sa, p)
		if err != nil {
			a.logger.Warn("preparing an accepted socket", "err", err)
			unix.Close(fd)
			a.stats.countClose(closedOnError)
			continue
		}
		a.srv.openConns.Add(1)
		if !p.accept(c) {
			unix.Close(fd)
			a.srv.openConns.Add(-1)
			a.stats.countClose(closedAtShutdown)
		}
	}
}

// acceptWithSpare answers EMFILE or ENFILE (err) from accept: the
// process, or the system, has no descriptor left, and the connection is
// still in the kernel's accept queue (Linux takes the descriptor before it
// looks at the queue, so the queue may also be empty). Kafka's Acceptor
// logs the error and tries again, and the client waits unanswered until a
// descriptor frees up. Here the spare descriptor is given up and the
// connection accepted with its number; then the spare is taken back. If
// that works, descriptors were freed meanwhile and the connection is
// served; if not, the connection gives its number back: it is closed at
// once, as one over max.connections is (counted in RejectedConnections),
// the spare is taken again, and errNoDescriptor is returned. The client
// learns at once to try later. Accept's own error (EAGAIN for an empty
// queue) is returned as it is, and err itself when there is no spare to
// give up (something else took its number).
func (a *Acceptor) acceptWithSpare(err error) (int, unix.Sockaddr, error) {
	if a.spare < 0 {
		if a.spare, _ = openSpare(); a.spare < 0 {
			return -1, nil, err
		}
	}
	unix.Close(a.spare)
	fd, sa, aerr := unix.Accept4(a.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	a.spare, _ = openSpare()
	if aerr != nil || a.spare >= 0 {
		return fd, sa, aerr
	}
	unix.Close(fd)
	a.spare, _ = openSpare() // -1 if the number was taken meanwhile: tried again next time
	a.stats.accepted.Add(1)
	a.stats.rejected.Add(1)
	if !a.shedding {
		a.logger.Warn("out of file descriptors: new connections are closed at accept until some are free", "err", err)
		a.shedding = true
	}
	return -1, nil, errNoDescriptor
}

// prepare sets the accepted socket's options, as Kafka's Acceptor does, and
// builds its conn for Processor p.
func (a *Acceptor) prepare(fd int, sa unix.Sockaddr, p *Processor) (*conn, error) {
	// Requests and responses are small and latency matters more than
	// packet count: no Nagle.
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return nil, fmt.Errorf("setsockopt TCP_NODELAY: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1); err != nil {
		return nil, fmt.Errorf("setsockopt SO_KEEPALIVE: %w", err)
	}
	if n := a.srv.cfg.SendBufferBytes; n > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, n); err != nil {
			return nil, fmt.Errorf("setsockopt SO_SNDBUF: %w", err)
		}
	}
	lsa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("getsockname: %w", err)
	}
	local := sockaddrToTCP(lsa)
	if a.local != nil && a.local.IP.Equal(local.IP) && a.local.Port == local.Port && a.local.Zone == local.Zone {
		local = a.local // one copy for every connection of the listener
	}
	a.local = local
	remote := sockaddrToTCP(sa)
	a.nextIndex++
	c := &conn{fd: fd, proc: p, id: connID(local, remote, a.nextIndex), remote: remote, local: local}
	c.state.SetMaxFrameBytes(p.listener.InitialMaxFrameBytes)
	return c, nil
}

// pause waits for d, or until Shutdown wakes the Acceptor.
func (a *Acceptor) pause(d time.Duration) {
	fds := []unix.PollFd{{Fd: int32(a.poller.efd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, int(d/time.Millisecond)); err != nil && err != unix.EINTR {
		a.logger.Error("poll", "err", err)
	}
}

// stop orders the Acceptor to stop and waits until it has closed the
// listening socket: from then on, connecting is refused.
func (a *Acceptor) stop() {
	a.mu.Lock()
	a.stopping = true
	if !a.exited {
		if err := a.poller.wake(); err != nil {
			a.logger.Error("waking the acceptor", "err", err)
		}
	}
	a.mu.Unlock()
	<-a.done
}

func (a *Acceptor) isStopping() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopping
}

// exit closes the listening socket and the poller.
func (a *Acceptor) exit() {
	a.mu.Lock()
	a.exited = true
	a.closeSockets()
	a.mu.Unlock()
	close(a.done)
}

// closeSockets releases the listening socket, the spare descriptor and
// the poller.
func (a *Acceptor) closeSockets() {
	if err := unix.Close(a.lfd); err != nil {
		a.logger.Warn("closing the listening socket", "err", err)
	}
	if a.spare >= 0 {
		unix.Close(a.spare)
		a.spare = -1
	}
	if err := a.poller.close(); err != nil {
		a.logger.Warn("closing the poller", "err", err)
	}
}

// sockaddrToTCP converts an IPv4 or IPv6 socket address.
func sockaddrToTCP(sa unix.Sockaddr) *net.TCPAddr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(append([]byte(nil), sa.Addr[:]...)), Port: sa.Port}
	case *unix.SockaddrInet6:
		var zone string
		if sa.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(sa.ZoneId)); err == nil {
				zone = ifi.Name
			}
		}
		return &net.TCPAddr{IP: net.IP(append([]byte(nil), sa.Addr[:]...)), Port: sa.Port, Zone: zone}
	}
	return &net.TCPAddr{}
}

// end build
