package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// The partition's side of transactions, driven as a transaction
// coordinator drives it: transactional batches (the attribute bit, a
// producer id, sequences), then WriteTxnMarkers to the leader. Readers are
// franz-go consumers, read_committed and read_uncommitted.

// produceTxn sends one transactional batch of values to the leader with
// acks=all and returns its error code and base offset.
func (tc *testCluster) produceTxn(pid int64, epoch int16, seq int32, transactional bool, values ...string) (int16, int64) {
	tc.t.Helper()
	b := record.NewBatch(time.Now().UnixMilli())
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, epoch, seq
	if transactional {
		b.Attributes = record.TransactionalFlag
	}
	for i, v := range values {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	p := tc.produceBatch(b)
	return p.ErrorCode, p.BaseOffset
}

// produceBatch encodes b and sends it to the leader alone, acks=all.
func (tc *testCluster) produceBatch(b *record.Batch) kmsg.ProduceResponseTopicPartition {
	tc.t.Helper()
	batch, err := record.AppendBatch(nil, b)
	require.NoError(tc.t, err)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: tc.tp.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{
		{Partition: tc.tp.Partition, Records: batch}}}}
	resp, err := req.RequestWith(context.Background(), tc.client(kgo.AllISRAcks()).Broker(int(tc.leader())))
	require.NoError(tc.t, err)
	return resp.Topics[0].Partitions[0]
}

// leader is the partition's leader as the controller last chose it.
func (tc *testCluster) leader() int32 {
	tc.t.Helper()
	for _, id := range tc.Running() {
		if p, ok := tc.server(id).Replicas.Partition(tc.tp.Topic, tc.tp.Partition); ok && p.Role() == replica.Leader {
			return id
		}
	}
	tc.t.Fatal("no leader")
	return -1
}

// writeMarker asks broker id to write a marker to the partition, as a
// transaction coordinator of coordinatorEpoch does, and returns the
// partition's error code.
func (tc *testCluster) writeMarker(id int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) int16 {
	tc.t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: pid, ProducerEpoch: epoch, Committed: commit,
		CoordinatorEpoch: coordinatorEpoch, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: tc.tp.Topic, Partitions: []int32{tc.tp.Partition}}}}}
	resp, err := req.RequestWith(context.Background(), tc.client(kgo.AllISRAcks()).Broker(int(id)))
	require.NoError(tc.t, err)
	require.Len(tc.t, resp.Markers, 1)
	require.Equal(tc.t, pid, resp.Markers[0].ProducerID)
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// readIsolated reads the partition from its start with franz-go at the
// given isolation level, until the offsets it has passed reach end, and
// returns the values.
func (tc *testCluster) readIsolated(level kgo.IsolationLevel, end int64) []string {
	tc.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tc.Addrs()...), kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchIsolationLevel(level),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tc.tp.Topic: {tc.tp.Partition: kgo.NewOffset().AtStart()}}))
	require.NoError(tc.t, err)
	defer cl.Close()
	var values []string
	isolation := int8(0)
	if level == kgo.ReadCommitted() {
		isolation = 1
	}
	empty := 0 // polls in a row that returned nothing
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		got := 0
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			got += len(p.Records)
			for _, r := range p.Records {
				values = append(values, string(r.Value))
			}
		})
		// franz-go moves past control batches and aborted records without
		// returning them (and returns no fetch that held only those):
		// done once there is end to read and nothing more came three
		// polls in a row.
		if empty = empty + 1; got > 0 {
			empty = 0
		}
		if empty >= 3 && tc.listLatest(isolation) >= end {
			return values
		}
		require.True(tc.t, time.Now().Before(deadline), "read %v so far", values)
	}
}

// saramaRead reads n records of the partition from its start with a
// Sarama consumer at the isolation level.
func saramaRead(t *testing.T, tc *testCluster, level sarama.IsolationLevel, n int) []string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.IsolationLevel = level
	c, err := sarama.NewConsumer(tc.Addrs(), cfg)
	require.NoError(t, err)
	defer c.Close()
	pc, err := c.ConsumePartition(tc.tp.Topic, tc.tp.Partition, sarama.OffsetOldest)
	require.NoError(t, err)
	defer pc.Close()
	var out []string
	timeout := time.After(20 * time.Second)
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("Sarama: %v", err)
		case <-timeout:
			t.Fatalf("Sarama read %v of %d", out, n)
		}
	}
	return out
}

// listLatest is ListOffsets LATEST at an isolation level.
func (tc *testCluster) listLatest(level int8) int64 {
	tc.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, level
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: tc.tp.Topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{
		{Partition: tc.tp.Partition, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
	resp, err := req.RequestWith(context.Background(), tc.client(kgo.AllISRAcks()).Broker(int(tc.leader())))
	require.NoError(tc.t, err)
	p := resp.Topics[0].Partitions[0]
	require.Zero(tc.t, p.ErrorCode)
	return p.Offset
}

// Two transactions and a plain producer interleave in one partition: the
// LSO stops at the oldest open transaction (read_committed consumers and
// ListOffsets see nothing past it), the committed one becomes readable
// when its marker is replicated, the aborted one never does, and
// read_uncommitted consumers see every data record and no marker.
func TestReadCommittedReadsOnlyCommittedTransactions(t *testing.T) {
	tc := startCluster(t, nil)
	p1, e1 := tc.initProducerID(0)
	p2, e2 := tc.initProducerID(0)
	p3, e3 := tc.initProducerID(0)
	must := func(code int16, _ int64) { t.Helper(); require.Zero(t, code) }

	must(tc.produceTxn(p3, e3, 0, false, "plain-0"))             // 0
	must(tc.produceTxn(p1, e1, 0, true, "commit-0", "commit-1")) // 1-2: P1's transaction opens
	must(tc.produceTxn(p2, e2, 0, true, "abort-0"))              // 3: P2's
	must(tc.produceTxn(p3, e3, 1, false, "plain-1"))             // 4
	must(tc.produceTxn(p1, e1, 2, true, "commit-2"))             // 5
	must(tc.produceTxn(p2, e2, 1, true, "abort-1"))              // 6

	require.Equal(t, int64(7), tc.listLatest(0), "read_uncommitted: the high watermark")
	require.Equal(t, int64(1), tc.listLatest(1), "read_committed: the LSO, P1's first offset")
	require.Equal(t, []string{"plain-0"}, tc.readIsolated(kgo.ReadCommitted(), 1))

	require.Zero(t, tc.writeMarker(tc.leader(), p1, e1, true, 0)) // 7: COMMIT
	require.Equal(t, int64(3), tc.listLatest(1), "P2's transaction holds the LSO now")
	require.Zero(t, tc.writeMarker(tc.leader(), p2, e2, false, 0)) // 8: ABORT
	must(tc.produceTxn(p3, e3, 2, false, "plain-2"))               // 9
	require.Equal(t, int64(10), tc.listLatest(1))

	require.Equal(t, []string{"plain-0", "commit-0", "commit-1", "plain-1", "commit-2", "plain-2"},
		tc.readIsolated(kgo.ReadCommitted(), 10))
	require.Equal(t, []string{"plain-0", "commit-0", "commit-1", "abort-0", "plain-1", "commit-2", "abort-1", "plain-2"},
		tc.readIsolated(kgo.ReadUncommitted(), 10))

	// Clients we did not write read the same: kcat (librdkafka) and
	// Sarama, read_committed.
	committed := []string{"plain-0", "commit-0", "commit-1", "plain-1", "commit-2", "plain-2"}
	kcat, err := exec.LookPath("kcat")
	require.NoError(t, err, "kcat is not installed: `make test` installs it (apt-get install kcat)")
	cmd := exec.Command(kcat, "-b", strings.Join(tc.Addrs(), ","), "-C", "-q", "-t", tc.tp.Topic, "-p", "0", "-o", "beginning", "-e",
		"-X", "isolation.level=read_committed", "-f", "%s\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s", stderr.String())
	require.Equal(t, committed, strings.Fields(string(out)), "kcat read_committed")
	require.Equal(t, committed, saramaRead(t, tc, sarama.ReadCommitted, 6), "Sarama read_committed")

	// Every replica has the markers and the aborted transaction: a new
	// leader answers the same.
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 1))
	require.Eventually(t, func() bool { return tc.leader() == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, committed, tc.readIsolated(kgo.ReadCommitted(), 10), "read from the new leader")
}

// A zombie is fenced: a marker of an older producer epoch than the
// partition has seen is INVALID_PRODUCER_EPOCH, one from an older
// coordinator TRANSACTION_COORDINATOR_FENCED; a producer with a
// transaction open may not write outside it (INVALID_TXN_STATE); a client
// may not write a control batch (INVALID_RECORD); markers go to leaders
// only.
func TestMarkersAndTransactionalBatchesAreChecked(t *testing.T) {
	tc := startCluster(t, nil)
	pid, epoch := tc.initProducerID(0)
	code, _ := tc.produceTxn(pid, epoch, 0, true, "a")
	require.Zero(t, code)
	code, _ = tc.produceTxn(pid, epoch, 1, false, "outside")
	require.Equal(t, kerr.InvalidTxnState.Code, code)

	require.Equal(t, kerr.NotLeaderForPartition.Code, tc.writeMarker(1, pid, epoch, true, 3), "a follower writes no marker")
	require.Zero(t, tc.writeMarker(0, pid, epoch+1, false, 3), "the coordinator fences the producer: ABORT at the bumped epoch")
	require.Equal(t, kerr.InvalidProducerEpoch.Code, tc.writeMarker(0, pid, epoch, true, 3), "a marker of the old epoch")
	require.Equal(t, kerr.TransactionCoordinatorFenced.Code, tc.writeMarker(0, pid, epoch+1, true, 2), "an old coordinator")
	code, _ = tc.produceTxn(pid, epoch, 1, true, "zombie")
	require.Equal(t, kerr.InvalidProducerEpoch.Code, code, "the fenced producer's next batch")

	b := record.AppendMarker(nil, record.Marker{ProducerID: pid, ProducerEpoch: epoch + 1, Commit: true}, time.Now().UnixMilli())
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: tc.tp.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: b}}}}
	resp, err := req.RequestWith(context.Background(), tc.client(kgo.AllISRAcks()).Broker(0))
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRecord.Code, resp.Topics[0].Partitions[0].ErrorCode, "a client's control batch")
	require.Equal(t, []string(nil), tc.readIsolated(kgo.ReadCommitted(), tc.logEnd(0)))
}

// A transaction open across a crash of its leader is still open on the
// new leader (a follower's producer state follows what it copies); the
// crashed broker, back and leading again, still knows the aborted
// transaction (its .txnindex) and the commit it missed (it copied the
// marker from the new leader).
func TestTransactionsSurviveLeaderCrashesAndRestarts(t *testing.T) {
	tc := startCluster(t, map[string]string{"log.segment.bytes": "1024"})
	pid, epoch := tc.initProducerID(0)
	other, otherEpoch := tc.initProducerID(0)
	seq := int32(0)
	for i := range 10 { // an aborted transaction across several segments
		code, _ := tc.produceTxn(pid, epoch, seq, true, fmt.Sprintf("aborted-%d-%0100d", i, 0))
		require.Zero(t, code)
		seq++
	}
	require.Zero(t, tc.writeMarker(0, pid, epoch, false, 0))
	code, openAt := tc.produceTxn(other, otherEpoch, 0, true, "open")
	require.Zero(t, code)
	for i := range 3 {
		code, _ := tc.produceTxn(pid, epoch, seq+int32(i), false, fmt.Sprintf("plain-%d", i))
		require.Zero(t, code)
	}
	end := tc.logEnd(0)

	tc.kill(0, tc.tp)
	require.Eventually(t, func() bool { return tc.leader() != 0 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, openAt, tc.listLatest(1), "the new leader knows the open transaction")
	require.Equal(t, []string(nil), tc.readIsolated(kgo.ReadCommitted(), openAt))

	require.Zero(t, tc.writeMarker(tc.leader(), other, otherEpoch, true, 0))
	require.NoError(t, tc.StartBroker(0))
	require.NoError(t, tc.Controller.BrokerStarted(0))
	tc.waitISR(1, 2, 0)
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 0))
	require.Eventually(t, func() bool { return tc.leader() == 0 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, end+1, tc.listLatest(1))
	require.Equal(t, []string{"open", "plain-0", "plain-1", "plain-2"}, tc.readIsolated(kgo.ReadCommitted(), end+1),
		"the restarted leader still drops the aborted transaction")
}

// produceKeyed sends one batch of key=value records to the leader with
// acks=all, transactional for pid >= 0 when txn is set.
func (tc *testCluster) produceKeyed(pid int64, epoch int16, seq int32, txn bool, kvs ...string) int16 {
	tc.t.Helper()
	b := record.NewBatch(time.Now().UnixMilli())
	if pid >= 0 {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, epoch, seq
	}
	if txn {
		b.Attributes = record.TransactionalFlag
	}
	for i := 0; i+1 < len(kvs); i += 2 {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i / 2), Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
	}
	return tc.produceBatch(b).ErrorCode
}

// The log cleaner stops at the last stable offset: a record of an open
// transaction does not shadow an older value of its key, which stays when
// the transaction aborts (without the bound, the older value was compacted
// away and, the aborted record dropped too, the key had no value left).
func TestCompactionStopsAtTheLastStableOffset(t *testing.T) {
	tc := startCluster(t, nil)
	leader := tc.server(0)
	p, ok := leader.Replicas.Partition(tc.tp.Topic, tc.tp.Partition)
	require.True(t, ok)
	cfg := p.Log.Config()
	cfg.CleanupPolicy = commitlog.CleanupCompact
	p.Log.SetConfig(cfg)
	clean := func() {
		t.Helper()
		require.NoError(t, p.Log.Roll())
		_, err := leader.Store().CleanPartition(tc.tp)
		require.NoError(t, err)
	}
	pid, epoch := tc.initProducerID(0)
	require.Zero(t, tc.produceKeyed(-1, -1, 0, false, "k", "old", "x", "x1"))
	require.Zero(t, tc.produceKeyed(pid, epoch, 0, true, "k", "aborted"))
	require.Zero(t, tc.produceKeyed(-1, -1, 0, false, "x", "x2"))
	clean() // the transaction is open: nothing at or after its first offset counts
	require.Zero(t, tc.writeMarker(0, pid, epoch, false, 0))
	clean()
	require.Eventually(t, func() bool { return tc.listLatest(1) == tc.logEnd(0) }, 10*time.Second, 10*time.Millisecond)
	got := tc.readIsolated(kgo.ReadCommitted(), tc.logEnd(0))
	require.Contains(t, got, "old", "the committed value of k stays")
	require.NotContains(t, got, "aborted")
	require.Contains(t, got, "x2")
}
