package controller

import (
	"sync"
	"time"
)

// event is one piece of the controller's work. Every event runs on the
// event goroutine, one at a time, in the order queued (Kafka's
// ControllerEventManager): ZooKeeper watches, broker requests and timers
// only queue events, so the controller's state needs no lock and its
// decisions follow one another as they happened.
type event struct {
	name    string // Kafka's event name, for the logs
	process func(c *Controller)
}

// eventQueue is an unbounded FIFO of events with one consumer. Unbounded,
// because the producers are ZooKeeper's watch goroutines and request
// handlers, which must never block on a busy controller; the queue is
// bounded in practice by the watches, which fire once until re-armed.
type eventQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	events []event // Protected by mu.
	closed bool    // Protected by mu.
}

func newEventQueue() *eventQueue {
	q := &eventQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// put queues e; after close it is dropped.
func (q *eventQueue) put(e event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.events = append(q.events, e)
	q.cond.Signal()
}

// take waits for the next event; ok is false once the queue is closed.
func (q *eventQueue) take() (e event, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.events) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return event{}, false
	}
	e = q.events[0]
	q.events[0] = event{}
	q.events = q.events[1:]
	return e, true
}

// close wakes take; the events still queued are dropped.
func (q *eventQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// run processes events until the queue closes.
func (c *Controller) run() {
	defer close(c.stopped)
	for {
		e, ok := c.queue.take()
		if !ok {
			return
		}
		start := time.Now()
		e.process(c)
		if d := time.Since(start); d > time.Second {
			c.logger.Warn("slow controller event", "event", e.name, "took", d.Round(time.Millisecond))
		} else {
			c.logger.Debug("controller event", "event", e.name, "took", d)
		}
	}
}
