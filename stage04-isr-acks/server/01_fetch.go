package server

import (
	"time"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// Fetch (key 1): stage 03's replica-aware handler, whose waiting fetches
// wait in the fetch purgatory (broker.FetchWaiter) instead of on a
// goroutine each: a follower's fetch until its leader appends, a
// consumer's until the high watermark brings fetch.min.bytes, both at most
// max_wait_ms.
type fetchWaiter struct{ s *Server }

func (w fetchWaiter) Park(f *broker.PendingFetch, wait time.Duration) {
	w.s.Fetches.TryCompleteElseWatch(&delayedFetch{f: f}, wait, f.Partitions()...)
}

// delayedFetch is Kafka's DelayedFetch: done when a read finds min bytes
// or an error (the partition moved, its epoch changed).
type delayedFetch struct {
	f    *broker.PendingFetch
	resp *protocol.FetchResponse // what the completing read found
}

func (d *delayedFetch) TryComplete() bool {
	resp, ok := d.f.Ready()
	if ok {
		d.resp = resp
	}
	return ok
}

// OnComplete answers with what TryComplete read, or, at the deadline, with
// a fresh read of whatever there is.
func (d *delayedFetch) OnComplete()   { d.f.Respond(d.resp) }
func (d *delayedFetch) OnExpiration() {}
