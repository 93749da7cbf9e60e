package controller

import (
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// Preferred leader election (auto.leader.rebalance.enable): after
// failovers the leaderships pile up on the brokers that stayed, and a
// broker that comes back leads nothing. Every
// leader.imbalance.check.interval.seconds the controller looks, broker by
// broker, at the partitions whose preferred replica (the first assigned)
// it is; if more than leader.imbalance.per.broker.percentage of them are
// led by someone else, it gives back those whose preferred replica is
// live and in the ISR. Kafka's checkAndTriggerAutoLeaderRebalance.

// rebalanceLoop queues the check every interval while this term lasts:
// its goroutine ends with the term, not at the first tick after it.
func (c *Controller) rebalanceLoop(term int) {
	interval := c.opts.LeaderImbalanceCheckInterval
	termDone := c.termDone
	c.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-termDone:
				return
			case <-t.C:
				stale := make(chan bool, 1)
				c.queue.put(event{"AutoPreferredReplicaLeaderElection", func(c *Controller) {
					if c.state == nil || c.term != term {
						stale <- true
						return
					}
					stale <- false
					c.rebalance()
				}})
				select {
				case <-c.done:
					return
				case <-termDone:
					return
				case s := <-stale:
					if s {
						return // the term ended: the next failover starts its own loop
					}
				}
			}
		}
	})
}

// rebalance moves leaderships back to preferred replicas where a broker's
// imbalance passes the threshold. It returns how many moved.
func (c *Controller) rebalance() int {
	cs := c.state
	imbalanced := map[int32][]commitlog.TopicPartition{}
	preferredOf := map[int32]int{}
	for _, tp := range cs.partitions() {
		replicas := cs.replicas(tp)
		s, ok := cs.states[tp]
		if len(replicas) == 0 || !ok || cs.deleting[tp.Topic] || cs.reassigning(tp) {
			continue
		}
		p := replicas[0]
		preferredOf[p]++
		if s.Leader != p {
			imbalanced[p] = append(imbalanced[p], tp)
		}
	}
	decided := map[commitlog.TopicPartition]kafkazk.VersionedState{}
	for broker, tps := range imbalanced {
		ratio := float64(len(tps)) / float64(preferredOf[broker])
		if ratio*100 <= float64(c.opts.LeaderImbalancePerBrokerPercentage) || !cs.isLive(broker) {
			continue
		}
		for _, tp := range tps {
			s := cs.states[tp]
			leader, ok := preferredElection(cs.replicas(tp), s.ISR, cs.isLive)
			if !ok {
				continue
			}
			next := s
			next.Leader = leader
			next.LeaderEpoch++
			next.ControllerEpoch = cs.epoch.Epoch
			decided[tp] = next
		}
	}
	if len(decided) == 0 {
		return 0
	}
	c.logger.Info("preferred replica leader election", "partitions", len(decided))
	b := newBatch()
	c.writeStates(decided, b)
	c.send(b)
	return len(decided)
}
