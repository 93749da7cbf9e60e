package network

// RequestChannel is the middle layer of §3.1: the one bounded queue between
// the Processors, which read requests, and the RequestHandlerPool, which
// handles them (Kafka: RequestChannel.requestQueue, an ArrayBlockingQueue of
// queued.max.requests). The way back, from handlers to Processors, is not
// here: each Request carries its connection, and Respond puts the response
// on that connection's Processor's own response queue (§3.1: "3 small
// Response queues, one per Processor thread").
//
// A full queue is back-pressure. Kafka's Processor blocks in put(); ours
// must keep writing responses while it waits (otherwise handlers that wait
// for their responses to drain could deadlock with it), so a Processor
// never blocks here: TrySend fails, the Processor parks the request, stops
// reading, and asks NotifyWhenSpace to wake it when a handler takes a
// request. The portable server's connection goroutines simply block in Send.
type RequestChannel struct {
	// queue holds the requests waiting for a handler; its capacity is
	// queued.max.requests. Closed by Close, after every sender stopped.
	queue chan *Request

	// space wakes, once, whoever found the queue full, when a handler
	// takes a request.
	space wakeList
}

// NewRequestChannel returns a RequestChannel holding at most capacity
// requests.
func NewRequestChannel(capacity int) *RequestChannel {
	return &RequestChannel{queue: make(chan *Request, capacity)}
}

// TrySend queues r if there is room and reports whether it did.
func (ch *RequestChannel) TrySend(r *Request) bool {
	select {
	case ch.queue <- r:
		return true
	default:
		return false
	}
}

// Send queues r, waiting for room; it gives up and returns false when stop
// is closed.
func (ch *RequestChannel) Send(r *Request, stop <-chan struct{}) bool {
	select {
	case ch.queue <- r:
		return true
	case <-stop:
		return false
	}
}

// NotifyWhenSpace arranges for wake to be called, once, the next time a
// handler takes a request. A caller whose TrySend failed must call it and
// then TrySend again: if the queue emptied in between, the second TrySend
// succeeds (and wake comes later, harmlessly); otherwise the queue is still
// full, so a handler will take a request, and that Receive sees the waiter,
// because it locks the queue after our failed TrySend did and so observes
// the waiter registered before it.
func (ch *RequestChannel) NotifyWhenSpace(wake func()) { ch.space.add(wake) }

// Receive takes the oldest request, waiting for one. ok is false once the
// channel is closed and empty.
func (ch *RequestChannel) Receive() (r *Request, ok bool) {
	r, ok = <-ch.queue
	if ok {
		ch.space.wakeAll()
	}
	return r, ok
}

// Len is the number of requests waiting in the queue.
func (ch *RequestChannel) Len() int { return len(ch.queue) }

// Close ends the channel: handlers take what is left and then stop. Call it
// only after every sender has stopped.
func (ch *RequestChannel) Close() { close(ch.queue) }
