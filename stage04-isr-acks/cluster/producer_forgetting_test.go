package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// The two ways a partition forgets a producer, end to end through the
// broker: retention deleted every batch it had (listener.LogStartAdvanced
// → State.RemoveBefore), or it was idle past transactional.id.expiration.ms
// (the expiry ticker → State.ExpireBefore). Either way its next batch is
// accepted at any sequence (KIP-360), while a producer the partition still
// knows is held to its sequence.

// leaderState is the leader's (broker 0's) partition and its producer
// state, the one its produce handler checks batches against.
func (tc *testCluster) leaderState() (*replica.Partition, *producer.State) {
	tc.t.Helper()
	p, ok := tc.server(0).Replicas.Partition(tc.tp.Topic, tc.tp.Partition)
	require.True(tc.t, ok)
	st, _, err := tc.server(0).ProducerState(p)
	require.NoError(tc.t, err)
	return p, st
}

// TestRetentionForgetsAProducerWhoseBatchesItDeleted: producer "gone"
// writes batches over several 1 KiB segments, then producer "kept" writes
// more than retention.bytes after them. Retention (run on the leader as
// its log.retention.check.interval.ms tick would; acks=all, so the high
// watermark, retention's limit, is past every batch) deletes every
// segment holding a batch of gone's, and the leader forgets gone: a batch
// at a sequence that does not follow its last, refused before with
// OUT_OF_ORDER_SEQUENCE_NUMBER, is accepted after (KIP-360). kept, whose
// last batches are still in the log, is still held to its sequence.
func TestRetentionForgetsAProducerWhoseBatchesItDeleted(t *testing.T) {
	const retentionBytes = 1024
	tc := startCluster(t, map[string]string{
		"log.segment.bytes":               "1024",
		"log.retention.bytes":             fmt.Sprint(retentionBytes),
		"log.retention.check.interval.ms": "3600000", // the test runs retention itself
	})
	gone, goneEpoch := tc.initProducerID(0)
	kept, keptEpoch := tc.initProducerID(0)
	for i := range 40 {
		code, _ := tc.produceIdempotent(gone, goneEpoch, int32(3*i), 3)
		require.Zero(t, code)
	}
	goneLast := tc.logEnd(0) - 1 // its sequence ends at 119
	p, st := tc.leaderState()
	require.Greater(t, len(p.Log.Segments()), 2, "gone's batches fill several segments")

	// kept writes until the segments after gone's last batch hold
	// retention.bytes: retention.bytes then deletes all of gone's.
	keptSeq := int32(0)
	after := func() (n int64) {
		for _, s := range p.Log.Segments() {
			if s.BaseOffset > goneLast {
				n += s.Size
			}
		}
		return n
	}
	for after() < retentionBytes {
		require.Less(t, keptSeq, int32(3*100), "kept's batches never filled retention.bytes")
		code, _ := tc.produceIdempotent(kept, keptEpoch, keptSeq, 3)
		require.Zero(t, code)
		keptSeq += 3
	}

	code, _ := tc.produceIdempotent(gone, goneEpoch, 1000, 1)
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, code, "before retention: sequences 120-999 are missing")
	require.Zero(t, p.Log.StartOffset())

	n, err := tc.server(0).Store().DeleteOldSegments()
	require.NoError(t, err)
	require.Positive(t, n)
	require.Greater(t, p.Log.StartOffset(), goneLast, "every segment with a batch of gone's is deleted")
	require.LessOrEqual(t, p.Log.StartOffset(), p.HighWatermark(), "and nothing past the high watermark")
	_, known := st.Entry(gone)
	require.False(t, known, "the leader forgot gone (LogStartAdvanced)")
	_, known = st.Entry(kept)
	require.True(t, known, "and still knows kept")

	code, _ = tc.produceIdempotent(gone, goneEpoch, 1000, 1)
	require.Zero(t, code, "after retention: gone's batch is accepted at any sequence (KIP-360)")
	code, _ = tc.produceIdempotent(gone, goneEpoch, 1002, 1)
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, code, "and its sequence goes on from 1000")
	code, _ = tc.produceIdempotent(kept, keptEpoch, keptSeq+1, 1)
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, code, "kept is still held to its sequence")
}

// TestAnIdleProducerExpiresAndABusyOneDoesNot: with
// transactional.id.expiration.ms and
// producer.id.expiration.check.interval.ms short, producer "idle" writes
// one batch and stops while producer "busy" writes one batch after
// another. The leader's expiry ticker forgets idle no sooner than the
// expiration after its batch, and never busy: idle's next batch is then
// accepted at any sequence (KIP-360), while busy is still held to its
// sequence.
func TestAnIdleProducerExpiresAndABusyOneDoesNot(t *testing.T) {
	// Long next to the time one acks=all produce takes here, even under
	// the race detector: busy's batches are never that far apart.
	const expiration = 200 * time.Millisecond
	tc := startCluster(t, map[string]string{
		"transactional.id.expiration.ms":           fmt.Sprint(expiration.Milliseconds()),
		"producer.id.expiration.check.interval.ms": "10",
	})
	_, st := tc.leaderState()
	cl := tc.client(kgo.AllISRAcks())
	produce := func(pid int64, epoch int16, seq int32) int16 {
		code, _ := tc.produceIdempotentWith(cl, 0, -1, pid, epoch, seq, 1)
		return code
	}
	idle, idleEpoch := tc.initProducerID(0)
	busy, busyEpoch := tc.initProducerID(0)
	require.Zero(t, produce(busy, busyEpoch, 0))
	start := time.Now() // before idle's batch takes its timestamp
	require.Zero(t, produce(idle, idleEpoch, 0))
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, produce(idle, idleEpoch, 1000), "idle is known: 1-999 are missing")

	busySeq := int32(1)
	var forgotten time.Duration
	for {
		require.Less(t, time.Since(start), 10*time.Second, "idle was never forgotten")
		e, ok := st.Entry(busy)
		require.True(t, ok, "busy forgotten %v after idle's batch, while producing", time.Since(start))
		require.Equal(t, busySeq-1, e.LastSeq())
		require.Zero(t, produce(busy, busyEpoch, busySeq))
		busySeq++
		if _, ok := st.Entry(idle); !ok {
			forgotten = time.Since(start)
			break
		}
	}
	t.Logf("idle forgotten %v after its batch; busy wrote %d batches meanwhile", forgotten, busySeq)
	// The ticker compares batch timestamps (ms, wall clock) with now: allow
	// for the millisecond idle's timestamp was truncated to.
	require.GreaterOrEqual(t, forgotten, expiration-time.Millisecond, "not before the expiration")

	require.Zero(t, produce(idle, idleEpoch, 1000), "idle's next batch is accepted at any sequence (KIP-360)")
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, produce(busy, busyEpoch, busySeq+1), "busy is still held to its sequence")
}
