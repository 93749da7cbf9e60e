package group

import (
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// ExpireOffsets removes the committed offsets that offsets.retention.ms
// has passed for, with tombstones, and the groups left Empty with no
// offset (Kafka's GroupMetadataManager.cleanupGroupMetadata, which runs
// every offsets.retention.check.interval.ms; the coordinator's own loop
// calls this). Which clock an offset's retention runs on (KIP-211):
//
//	a group that has had members and is Empty now   since it became Empty
//	a consumer group that is Stable                 since each commit, for
//	                                                topics no member subscribes to
//	a group that never had members (a consumer      since each commit
//	  with manual assignment, an admin tool)
//	an offset committed with an expire time (v1)    at that time
//
// Offsets of a group with members in a rebalance are kept. It returns the
// number of offsets and of groups removed.
func (c *Coordinator) ExpireOffsets() (offsets, groups int) {
	if c.cfg.OffsetsRetention <= 0 {
		return 0, 0
	}
	all, _ := c.snapshot()
	now := c.now()
	for _, g := range all {
		g.lock()
		n, dead := c.expireGroup(g, now)
		g.unlock()
		offsets += n
		if dead {
			groups++
		}
	}
	if offsets > 0 || groups > 0 {
		c.logger.Info("removed expired offsets and empty groups", "offsets", offsets, "groups", groups)
	}
	return offsets, groups
}

// expireGroup expires one group's offsets; the caller holds its lock.
func (c *Coordinator) expireGroup(g *Group, now time.Time) (expired int, dead bool) {
	var since func(o Offset) int64 // the time retention counts from
	subscribed := map[string]bool{}
	switch {
	case g.is(Dead):
		return 0, false
	case g.protoType == "":
		since = func(o Offset) int64 { return o.CommitTime }
	case g.is(Empty):
		since = func(Offset) int64 { return g.stateTime.UnixMilli() }
	case g.is(Stable):
		topics, ok := g.subscribedTopics()
		if !ok {
			return 0, false
		}
		subscribed = topics
		since = func(o Offset) int64 { return o.CommitTime }
	default:
		return 0, false
	}
	var keys, values [][]byte
	var gone []commitlog.TopicPartition
	for tp, o := range g.offsets {
		due := now.UnixMilli()-since(o) >= c.cfg.OffsetsRetention.Milliseconds()
		if o.ExpireTime >= 0 {
			due = now.UnixMilli() >= o.ExpireTime
		}
		if due && !subscribed[tp.Topic] {
			gone = append(gone, tp)
			keys, values = append(keys, offsetKey(g.id, tp)), append(values, nil)
		}
	}
	for _, tp := range gone {
		delete(g.offsets, tp)
	}
	if g.is(Empty) && len(g.offsets) == 0 {
		g.transition(Dead, now)
		c.forget(g)
		keys, values = append(keys, groupKey(g.id)), append(values, nil)
		dead = true
	}
	if len(keys) > 0 {
		// As in Kafka the expiry takes effect at once: if its tombstones
		// are not written, a new coordinator loads the offsets back and
		// expires them again.
		c.store(g, keys, values, func(code int16) {
			if code != 0 {
				c.logger.Warn("writing the tombstones of expired offsets", "group", g.id, "code", code)
			}
		})
	}
	return len(gone), dead
}
