package controller

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// build 05.J: controlled shutdown: move leadership off a stopping broker, then take it out of the ISRs
// tests: TestControlledShutdownOfAFollowerBumpsTheLeaderEpoch, TestAControlledShutdownStopsAFollowerOnlyOnceItIsOutOfTheISR, TestControlledShutdownAndPreferredElections

// Errors of ControlledShutdown, mapped to Kafka's error codes by the
// handler of the request.
var (
	// ErrNotController: this broker is not the controller (NOT_CONTROLLER).
	ErrNotController = errors.New("controller: this broker is not the controller")
	// ErrStaleBrokerEpoch: the request comes from an earlier incarnation
	// of the broker, or one the controller does not know
	// (STALE_BROKER_EPOCH).
	ErrStaleBrokerEpoch = errors.New("controller: stale broker epoch")
)

// ControlledShutdown is Kafka's controlled shutdown, asked by a broker
// about to stop (the ControlledShutdown request, on SIGTERM): the
// controller moves the leadership of every partition the broker leads to
// another replica in the ISR, takes the broker out of the ISRs it is in as
// a follower, and tells everyone, before the broker exits. Clients then
// switch leaders with a retriable error or none, instead of waiting for
// the session timeout to tell the controller the broker died. It returns
// the partitions the broker still leads (no other replica in the ISR); the
// broker asks again, up to controlled.shutdown.max.retries, and then stops
// anyway. A follower whose removal from the ISR could not be written is
// among the remaining too: it still follows, and the next ask tries again.
func (c *Controller) ControlledShutdown(id int32, brokerEpoch int64) ([]commitlog.TopicPartition, error) {
	type result struct {
		remaining []commitlog.TopicPartition
		err       error
	}
	out := make(chan result, 1)
	c.queue.put(event{"ControlledShutdown", func(c *Controller) {
		remaining, err := c.controlledShutdown(id, brokerEpoch)
		out <- result{remaining, err}
	}})
	select {
	case r := <-out:
		return r.remaining, r.err
	case <-c.stopped:
		return nil, ErrNotController
	}
}

func (c *Controller) controlledShutdown(id int32, brokerEpoch int64) ([]commitlog.TopicPartition, error) {
	cs := c.state
	if cs == nil {
		return nil, ErrNotController
	}
	b, ok := cs.live[id]
	if !ok || (brokerEpoch >= 0 && brokerEpoch != b.Epoch) {
		return nil, fmt.Errorf("%w: broker %d at epoch %d", ErrStaleBrokerEpoch, id, brokerEpoch)
	}
	cs.shuttingDown[id] = true
	c.logger.Info("controlled shutdown", "broker", id)

	// The leaderships first, written and told together; then the ISRs the
	// broker follows in (Kafka's order), so the last leadership to move
	// does not wait for every ISR write.
	moves := map[commitlog.TopicPartition]kafkazk.VersionedState{}
	var followed []commitlog.TopicPartition
	for _, tp := range cs.partitionsOn(id) {
		s, ok := cs.states[tp]
		replicas := cs.replicas(tp)
		if !ok || cs.deleting[tp.Topic] || len(replicas) < 2 {
			continue
		}
		if s.Leader != id {
			followed = append(followed, tp)
			continue
		}
		leader, newISR, ok := controlledShutdownElection(replicas, s.ISR, cs.isLive)
		if !ok {
			continue // stays with the broker: reported as remaining
		}
		next := s
		next.Leader, next.ISR = leader, newISR
		next.LeaderEpoch++
		next.ControllerEpoch = cs.epoch.Epoch
		moves[tp] = next
	}
	moved := newBatch()
	c.writeStates(moves, moved)
	c.send(moved)
	if c.state != cs {
		return nil, ErrNotController // a write found another controller
	}

	// A follower leaves the ISR, at a new leader epoch (the leader ignores
	// a LeaderAndIsr at its current epoch: without the bump it kept the
	// stopped broker in its own ISR), and only then stops fetching (Kafka's
	// OfflineReplica transition: the ISR written, with the BADVERSION
	// retried, then StopReplica). A follower whose ISR write failed (the
	// leader changed the state twice under the controller) is not stopped:
	// stopped but still in the ISR, it would hold back the high watermark
	// and acks=all until the leader's replica.lag.time.max.ms ran out. It
	// keeps fetching and is reported as remaining, so the broker asks
	// again.
	stops := newBatch()
	failed, ok := c.shrinkISRs(func(r int32) bool { return r == id }, followed, stops)
	if !ok {
		return nil, ErrNotController
	}
	for _, tp := range followed {
		if _, known := cs.states[tp]; !known || slices.Contains(failed, tp) {
			continue // its state znode is gone, or it is still in the ISR
		}
		cs.machines.replicaTo(Replica{tp, id}, OfflineReplica)
		stops.addStopReplica(id, tp, false)
	}
	c.send(stops)

	var remaining []commitlog.TopicPartition
	for _, tp := range cs.partitionsOn(id) {
		if s, ok := cs.states[tp]; ok && s.Leader == id {
			remaining = append(remaining, tp)
		}
	}
	remaining = dedupe(append(remaining, failed...))
	c.logger.Info("controlled shutdown: leaderships moved", "broker", id, "moved", len(moves), "stopped", len(stops.stopReplica[id]),
		"remaining", len(remaining))
	return remaining, nil
}

// end build
