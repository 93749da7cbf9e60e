package isr

import (
	"errors"
)

// The writer: one goroutine that takes the queued ISR changes in order and,
// for each, writes the store, installs the result and records it for the
// controller. One is enough: a leader's ISR changes are rare (a follower
// falling behind or catching up), and one at a time keeps their order in
// the store's history the order they were decided in. Kafka 2.6 wrote on
// the thread that decided (the fetch handler, the isr-expiration task),
// under the partition's leaderIsrUpdateLock; 2.7's AlterIsrManager queues
// them for one sender thread, as here.

// writeLoop runs the writer until Close.
func (m *Manager) writeLoop() {
	defer m.loops.Done()
	for {
		select {
		case <-m.stop:
			return // queued changes are dropped: nothing of them was written
		default:
		}
		c := m.next()
		if c == nil {
			select {
			case <-m.wake:
			case <-m.stop:
				return
			}
			continue
		}
		m.write(c)
		m.mu.Lock()
		if m.pending[c.p.TopicPartition] == c {
			delete(m.pending, c.p.TopicPartition)
		}
		m.mu.Unlock()
	}
}

// next takes the oldest queued change, or returns nil.
func (m *Manager) next() *isrChange {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) == 0 {
		return nil
	}
	c := m.queue[0]
	m.queue[0] = nil
	m.queue = m.queue[1:]
	return c
}

// write writes c's ISR to the store, conditional on the partition epoch c
// was computed from, and installs it in the partition if the write
// succeeded. It holds no lock of the Manager: the store may block on the
// network, and installing tells the listener (the purgatories).
func (m *Manager) write(c *isrChange) {
	tp, v := c.p.TopicPartition, c.v
	// A LeaderAndIsr may have come while c waited: the controller's state
	// is newer than the one c was computed from, and wins.
	if !m.stillAt(c) {
		m.logger.Debug("dropping an ISR change: the partition's state changed since", "partition", tp,
			"leader_epoch", v.LeaderEpoch, "partition_epoch", v.PartitionEpoch)
		return
	}
	m.logger.Info(c.msg, append([]any{"partition", tp, "isr", v.ISR, "new_isr", c.isr}, c.args...)...)
	state := PartitionState{ControllerEpoch: v.ControllerEpoch, Leader: m.brokerID, LeaderEpoch: v.LeaderEpoch, ISR: c.isr}
	version, err := m.store.UpdatePartitionState(tp, state, v.PartitionEpoch)
	if errors.Is(err, ErrBadVersion) {
		// As Kafka's checkLeaderAndIsrZkData: if what is stored is what
		// this leader meant to write (a retried write whose first attempt
		// landed), the write succeeded, at the version stored.
		if stored, v2, rerr := m.store.PartitionState(tp); rerr == nil && stored.Equal(state) {
			version, err = v2, nil
		}
	}
	switch {
	case errors.Is(err, ErrBadVersion):
		if !m.stillAt(c) {
			return // the LeaderAndIsr of whoever wrote it has arrived: nothing to wait for
		}
		m.mu.Lock()
		m.fenced[tp] = fence{p: c.p, epoch: v.PartitionEpoch}
		m.mu.Unlock()
		m.logger.Warn("the partition state changed under this leader; not changing the ISR until the controller says",
			"partition", tp, "partition_epoch", v.PartitionEpoch, "err", err)
		return
	case err != nil:
		// Not written (ZooKeeper unreachable, say): the next follower
		// fetch or shrink check decides again.
		m.logger.Error("cannot write the ISR", "partition", tp, "err", err)
		return
	}
	if !c.p.UpdateISR(v.LeaderEpoch, v.PartitionEpoch, c.isr, version) {
		// A LeaderAndIsr arrived between our write and now: its state is
		// newer than ours, and wins.
		return
	}
	// Counted as soon as the partition has it, so that nobody reads the
	// new ISR and an old count.
	if c.shrink {
		m.shrinks.Add(1)
	} else {
		m.expands.Add(1)
	}
	m.recordIsrChange(tp)
}

// stillAt reports whether c's partition is still led here at the leader
// and partition epochs c was computed from.
func (m *Manager) stillAt(c *isrChange) bool {
	now, ok := c.p.LeaderView()
	return ok && now.LeaderEpoch == c.v.LeaderEpoch && now.PartitionEpoch == c.v.PartitionEpoch
}
