package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetCommitVersion and offsetFetchVersion are the highest versions
// sent: OffsetCommit v9+ and OffsetFetch v8+ change shape (KIP-848's
// member epochs, KIP-709's batched groups).
const (
	offsetCommitVersion = 8
	offsetFetchVersion  = 7
)

// An offsetsOf picks which offset of a partition to commit.
type offsetsOf func(*partitionState) int64

// consumedOffsets are the background committer's: the records before the
// latest Poll, which the application asked past.
func consumedOffsets(s *partitionState) int64 { return s.consumed.Load() }

// positions are CommitSync's and Close's: everything Poll returned.
func positions(s *partitionState) int64 { return s.position.Load() }

// CommitSync commits the position of every assigned partition (what Poll
// returned so far) and waits for the coordinator's answer.
func (c *Consumer) CommitSync(ctx context.Context) error {
	if c.group == nil {
		return fmt.Errorf("%w: commits need %s", ErrConfig, KeyGroupID)
	}
	return c.group.commit(ctx, c.assigned.Load(), positions)
}

// CommitAsync is CommitSync in the background; done (may be nil) runs
// with the result on another goroutine.
func (c *Consumer) CommitAsync(done func(error)) {
	if c.group == nil {
		if done != nil {
			done(fmt.Errorf("%w: commits need %s", ErrConfig, KeyGroupID))
		}
		return
	}
	a := c.assigned.Load()
	offsets := snapshot(a, positions) // now, not when the goroutine runs
	go func() {
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
		defer cancel()
		err := c.group.commitOffsets(ctx, offsets)
		if done != nil {
			done(err)
		}
	}()
}

// commitLoop is the auto-committer (enable.auto.commit): every
// auto.commit.interval.ms it commits what the application consumed. It
// reads the partition states' atomics; Poll and the fetchers never wait
// for it.
func (m *member) commitLoop() {
	c := m.c
	if !c.cfg.EnableAutoCommit {
		return
	}
	tick := time.NewTicker(c.cfg.AutoCommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(m.ctx, c.cfg.RequestTimeout)
		if err := m.commit(ctx, c.assigned.Load(), consumedOffsets); err != nil && m.ctx.Err() == nil {
			c.log.Info("auto commit failed", "group", c.cfg.GroupID, "err", err)
		}
		cancel()
	}
}

// A pending commit is one partition's offset as it was read.
type pending struct {
	state  *partitionState
	offset int64
}

// snapshot reads, for each partition of a, the offset which picks, where
// it is known and not committed yet.
func snapshot(a *assignment, which offsetsOf) []pending {
	var out []pending
	for _, s := range a.list {
		off := which(s)
		if off != unknown && off != s.committed.Load() {
			out = append(out, pending{s, off})
		}
	}
	return out
}

func (m *member) commit(ctx context.Context, a *assignment, which offsetsOf) error {
	return m.commitOffsets(ctx, snapshot(a, which))
}

// commitOffsets sends one OffsetCommit with the membership's generation
// and records each acknowledged offset in its partition's committed.
func (m *member) commitOffsets(ctx context.Context, offsets []pending) error {
	if len(offsets) == 0 {
		return nil
	}
	c := m.c
	conn, err := m.coordinator(ctx)
	if err != nil {
		return err
	}
	gen := m.gen.Load()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = c.cfg.GroupID, gen.id, gen.memberID
	for _, o := range offsets {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != o.state.tp.Topic {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = o.state.tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = o.state.tp.Partition, o.offset
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	resp, err := request[*kmsg.OffsetCommitResponse](ctx, conn, req, offsetCommitVersion)
	if err != nil {
		m.lostCoordinator(conn)
		return fmt.Errorf("commit offsets of %s: %w", c.cfg.GroupID, err)
	}
	want := map[TopicPartition]pending{}
	for _, o := range offsets {
		want[o.state.tp] = o
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			o, ok := want[TopicPartition{t.Topic, p.Partition}]
			if !ok {
				continue
			}
			if err := m.checkCode(conn, p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("commit %s[%d] at %d: %w", t.Topic, p.Partition, o.offset, err))
				continue
			}
			// Responses on one connection come in order, so a later
			// commit's answer is never overwritten by an earlier one's.
			o.state.committed.Store(o.offset)
		}
	}
	return errors.Join(errs...)
}

// fetchCommitted asks the coordinator for parts' committed offsets; a
// partition without one is left out.
func (m *member) fetchCommitted(ctx context.Context, parts []TopicPartition) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	if len(parts) == 0 {
		return out, nil
	}
	c := m.c
	for {
		conn, err := m.coordinator(ctx)
		if err != nil {
			return nil, err
		}
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = c.cfg.GroupID
		for _, tp := range parts {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic = tp.Topic
				req.Topics = append(req.Topics, t)
			}
			t := &req.Topics[len(req.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		resp, err := request[*kmsg.OffsetFetchResponse](ctx, conn, req, offsetFetchVersion)
		if err != nil {
			m.lostCoordinator(conn)
			return nil, fmt.Errorf("fetch offsets of %s: %w", c.cfg.GroupID, err)
		}
		err = m.checkCode(conn, resp.ErrorCode)
		if errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.NotCoordinator) {
			c.sleep(c.cfg.RetryBackoff) // the coordinator is loading the group, or moved
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			return out, nil // kfake's answer for a group that never committed: nothing committed
		}
		if err != nil {
			return nil, fmt.Errorf("fetch offsets of %s: %w", c.cfg.GroupID, err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("fetch offsets of %s: %s[%d]: %w", c.cfg.GroupID, t.Topic, p.Partition, err)
				}
				if p.Offset >= 0 {
					out[TopicPartition{t.Topic, p.Partition}] = p.Offset
				}
			}
		}
		return out, nil
	}
}
