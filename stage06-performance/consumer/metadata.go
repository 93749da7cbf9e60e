package consumer

import (
	"maps"
	"slices"
	"time"
)

// leaderOf is tp's leader in the last metadata, -1 if unknown.
func (c *Consumer) leaderOf(tp TopicPartition) int32 {
	m := c.pool.Metadata()
	if m == nil {
		return -1
	}
	t := m.Topics[tp.Topic]
	if t == nil || int(tp.Partition) >= len(t.Partitions) || tp.Partition < 0 {
		return -1
	}
	return t.Partitions[tp.Partition].Leader
}

func (c *Consumer) refreshSoon() {
	select {
	case c.refresh <- struct{}{}:
	default:
	}
}

func (c *Consumer) reportErr(err error) {
	select {
	case c.errs <- err:
	default: // Poll has not collected the last ones: it will see those
	}
}

// metadataLoop keeps the partitions' leaders current and a fetcher
// running for every broker that leads one: on demand (an assignment, a
// NOT_LEADER answer) and every metadata.max.age.ms.
func (c *Consumer) metadataLoop() {
	tick := time.NewTicker(c.cfg.MetadataMaxAge)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		case <-c.refresh:
		}
		topics := c.wantedTopics()
		if len(topics) == 0 {
			continue
		}
		m, err := c.pool.Refresh(c.ctx, topics)
		if c.ctx.Err() != nil {
			return // closed
		}
		if err != nil {
			c.log.Warn("metadata refresh failed", "err", err)
			c.sleep(c.cfg.RetryBackoff)
			c.refreshSoon()
			continue
		}
		missing := false
		for _, s := range c.assigned.Load().list {
			leader := int32(-1)
			if t := m.Topics[s.tp.Topic]; t != nil && int(s.tp.Partition) < len(t.Partitions) {
				leader = t.Partitions[s.tp.Partition].Leader
			}
			s.leader.Store(leader)
			if leader < 0 {
				missing = true
			} else {
				c.startFetcher(leader)
			}
		}
		c.changed.broadcast()
		if missing { // no leader yet (a topic being created, an election)
			c.sleep(c.cfg.RetryBackoff)
			c.refreshSoon()
		}
	}
}

// wantedTopics are the assigned topics and the group's subscription.
func (c *Consumer) wantedTopics() []string {
	set := map[string]bool{}
	for _, s := range c.assigned.Load().list {
		set[s.tp.Topic] = true
	}
	if c.group != nil {
		for _, t := range c.group.topics() {
			set[t] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (c *Consumer) startFetcher(broker int32) {
	c.fetchersMu.Lock()
	defer c.fetchersMu.Unlock()
	if c.fetchers[broker] != nil || c.ctx.Err() != nil {
		return
	}
	f := &fetcher{c: c, broker: broker}
	c.fetchers[broker] = f
	c.wg.Go(f.run)
}
