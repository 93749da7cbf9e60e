//go:build linux

package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// build 02.A: the poller: epoll, an eventfd to wake it, and a wait that does not hold an OS thread
// tests: TestOneRoundTrip, TestThousandConcurrentConnectionsAreServed

// poller is one epoll instance plus an eventfd registered in it: Kafka's
// java.nio Selector with its wakeup(). Every Processor, and the Acceptor,
// owns one. The owner waits in wait; any other goroutine hands it work by
// queueing the work and calling wake, which makes the eventfd readable and
// so ends the wait.
//
// How the owner waits is the one place where Go differs from Java. A Java
// Selector blocks its thread in epoll_wait. A goroutine that does the same
// holds an OS thread in the system call, and every wake-up then costs a
// kernel thread wake-up plus the Go scheduler handing the goroutine a P
// again: measured here, that made one connection in a closed loop five
// times slower than a goroutine per connection. So wait never blocks in
// epoll_wait: it polls without blocking, and when nothing is ready it
// parks the goroutine on the Go runtime's own netpoller, which watches the
// epoll fd itself (an epoll fd is readable when its epoll set has events,
// and can sit in another epoll set). The reactor keeps its own epoll set,
// its own event loop and its own wake-ups; only the parking is Go's.
type poller struct {
	epfd int // the epoll instance, non-blocking
	efd  int // the eventfd, registered for EPOLLIN in epfd

	// file wraps epfd so that the Go runtime's netpoller watches it; raw is
	// its RawConn. file owns epfd: closing file closes it.
	file *os.File
	raw  syscall.RawConn

	// ready is the callback raw.Read calls, allocated once; it polls epfd
	// into events and leaves the result in n and err.
	ready  func(fd uintptr) bool
	events []unix.EpollEvent
	n      int
	err    error
}

// Interest sets. Level-triggered: epoll reports a socket for as long as it
// is readable (writable), so a Processor may read once per event and come
// back later without losing anything, and must drop the interest when it
// does not want to hear about it (a muted connection).
const (
	epollIn  = unix.EPOLLIN
	epollOut = unix.EPOLLOUT
	// epollRead is a connection's read interest: data, and the peer's
	// close, which a muted connection needs to hear about too (a client
	// that gives up on a long poll).
	epollRead = unix.EPOLLIN | unix.EPOLLRDHUP
)

// openPoller creates the epoll instance and its eventfd.
func openPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	// Non-blocking, so that os.NewFile hands it to the runtime poller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("set epoll fd non-blocking: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	p := &poller{epfd: epfd, efd: efd, file: os.NewFile(uintptr(epfd), "epoll")}
	p.ready = p.poll
	if p.raw, err = p.file.SyscallConn(); err == nil {
		err = p.add(efd, epollIn)
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// add registers fd with the interest set events.
func (p *poller) add(fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

// modify replaces fd's interest set. An empty set still reports EPOLLERR and
// EPOLLHUP, which epoll always reports.
func (p *poller) modify(fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl mod fd %d: %w", fd, err)
	}
	return nil
}

// remove unregisters fd. Closing fd would do it too, but only if no other
// descriptor refers to the same socket; removing first is explicit.
func (p *poller) remove(fd int) error {
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("epoll_ctl del fd %d: %w", fd, err)
	}
	return nil
}

// wait waits until some registered descriptor is ready or timeout passes
// (negative: no limit, zero: do not wait), fills events and returns how
// many it filled. Only the owner's goroutine calls it.
func (p *poller) wait(events []unix.EpollEvent, timeout time.Duration) (int, error) {
	p.events = events
	if p.poll(0) || timeout == 0 {
		return p.n, p.err
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	if err := p.file.SetReadDeadline(deadline); err != nil {
		return 0, fmt.Errorf("set epoll fd deadline: %w", err)
	}
	// raw.Read calls p.ready; while it returns false (nothing ready), the
	// goroutine is parked until the runtime sees epfd readable, and then
	// calls p.ready again. The runtime watches epfd edge-triggered and
	// p.ready found the set empty, so the next event is an edge: none is
	// missed between the check and the parking.
	err := p.raw.Read(p.ready)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("wait for epoll fd: %w", err)
	}
	return p.n, p.err
}

// poll is one non-blocking epoll_wait into p.events; it reports whether it
// has a result (events or an error). A signal interrupting it (EINTR)
// counts as nothing ready.
func (p *poller) poll(uintptr) bool {
	n, err := unix.EpollWait(p.epfd, p.events, 0)
	switch {
	case err == unix.EINTR:
		p.n, p.err = 0, nil
	case err != nil:
		p.n, p.err = 0, fmt.Errorf("epoll_wait: %w", err)
	default:
		p.n, p.err = n, nil
	}
	return p.n > 0 || p.err != nil
}

// one is the 8-byte counter increment an eventfd write takes, in host byte
// order (amd64 and arm64 are little-endian).
var one = binary.NativeEndian.AppendUint64(nil, 1)

// wake makes the next (or current) wait return, from any goroutine. The
// eventfd counts the writes; EAGAIN means the counter is at its maximum,
// so the poller is already woken.
func (p *poller) wake() error {
	for {
		_, err := unix.Write(p.efd, one)
		switch err {
		case nil, unix.EAGAIN:
			return nil
		case unix.EINTR:
			continue
		default:
			return fmt.Errorf("eventfd write: %w", err)
		}
	}
}

// clearWake resets the eventfd counter so that it stops being readable.
// Call it before looking at the queued work, never after: a wake that
// arrives after the reset is kept for the next wait.
func (p *poller) clearWake() error {
	var buf [8]byte
	for {
		_, err := unix.Read(p.efd, buf[:])
		switch err {
		case nil, unix.EAGAIN: // EAGAIN: already zero
			return nil
		case unix.EINTR:
			continue
		default:
			return fmt.Errorf("eventfd read: %w", err)
		}
	}
}

// close releases the eventfd and the epoll instance. No goroutine may call
// wake afterwards (the descriptor number could belong to another file by
// then): owners guard wake with a closed flag under a lock.
func (p *poller) close() error {
	err1 := unix.Close(p.efd)
	err2 := p.file.Close() // also takes epfd out of the runtime's netpoller
	if err1 != nil {
		return fmt.Errorf("close eventfd: %w", err1)
	}
	if err2 != nil {
		return fmt.Errorf("close epoll: %w", err2)
	}
	return nil
}

// end build
