package controller

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

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
// anyway.
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
	shrinks := map[commitlog.TopicPartition]kafkazk.VersionedState{}
	followed := newBatch()
	for _, tp := range cs.partitionsOn(id) {
		s, ok := cs.states[tp]
		if !ok || cs.deleting[tp.Topic] {
			continue
		}
		replicas := cs.replicas(tp)
		next := s
		next.LeaderEpoch++
		next.ControllerEpoch = cs.epoch.Epoch
		switch {
		case s.Leader == id && len(replicas) > 1:
			leader, newISR, ok := controlledShutdownElection(replicas, s.ISR, cs.isLive)
			if !ok {
				continue // stays with the broker: reported as remaining
			}
			next.Leader, next.ISR = leader, newISR
			moves[tp] = next
		case s.Leader != id && slices.Contains(s.ISR, id):
			// A follower: it leaves the ISR and stops fetching (Kafka's
			// OfflineReplica for a replica of a shutting-down broker).
			// From next, not s: next carries the bumped leader epoch, which
			// makes the leader take the new ISR (a LeaderAndIsr at its
			// current epoch is ignored).
			next.PartitionState = withoutReplicas(next.PartitionState, func(r int32) bool { return r == id })
			cs.machines.replicaTo(Replica{tp, id}, OfflineReplica)
			followed.addStopReplica(id, tp, false)
			shrinks[tp] = next
		}
	}
	moved := newBatch()
	c.writeStates(moves, moved)
	c.send(moved)
	c.writeStates(shrinks, followed)
	c.send(followed)
	if c.state == nil {
		return nil, ErrNotController // a write found another controller
	}
	decided := moves
	var remaining []commitlog.TopicPartition
	for _, tp := range cs.partitionsOn(id) {
		if s, ok := cs.states[tp]; ok && s.Leader == id {
			remaining = append(remaining, tp)
		}
	}
	c.logger.Info("controlled shutdown: leaderships moved", "broker", id, "moved", len(decided), "remaining", len(remaining))
	return remaining, nil
}
