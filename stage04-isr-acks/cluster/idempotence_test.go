package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	base "github.com/kafkaworkbook/workbook/stage03-replication/cluster"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// initProducerID asks broker id for a producer id, as an idempotent
// client does before its first produce.
func (tc *testCluster) initProducerID(id int32) (int64, int16) {
	tc.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60_000
	resp, err := req.RequestWith(context.Background(), tc.client(kgo.AllISRAcks()).Broker(int(id)))
	require.NoError(tc.t, err)
	require.Zero(tc.t, resp.ErrorCode)
	return resp.ProducerID, resp.ProducerEpoch
}

// produceIdempotent sends one idempotent batch of n records straight to
// the leader with acks=all and returns its error code and base offset.
func (tc *testCluster) produceIdempotent(pid int64, epoch int16, seq int32, n int) (int16, int64) {
	tc.t.Helper()
	return tc.produceIdempotentTo(0, -1, pid, epoch, seq, n)
}

// produceIdempotentTo sends one idempotent batch of n records, values
// seq-<n>, to a broker with the given acks.
func (tc *testCluster) produceIdempotentTo(broker int32, acks int16, pid int64, epoch int16, seq int32, n int) (int16, int64) {
	tc.t.Helper()
	clientAcks := kgo.AllISRAcks() // franz-go rewrites a request's acks to its own setting
	if acks == 1 {
		clientAcks = kgo.LeaderAck()
	}
	return tc.produceIdempotentWith(tc.client(clientAcks), broker, acks, pid, epoch, seq, n)
}

// produceIdempotentWith is produceIdempotentTo through a client the
// caller keeps (its acks setting must match acks), for a test that sends
// many batches.
func (tc *testCluster) produceIdempotentWith(cl *kgo.Client, broker int32, acks int16, pid int64, epoch int16, seq int32, n int) (int16, int64) {
	tc.t.Helper()
	b := record.NewBatch(time.Now().UnixMilli())
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, epoch, seq
	for i := range n {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprintf("seq-%d", int(seq)+i))})
	}
	batch, err := record.AppendBatch(nil, b)
	require.NoError(tc.t, err)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 10_000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: tc.tp.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{
		{Partition: tc.tp.Partition, Records: batch}}}}
	resp, err := req.RequestWith(context.Background(), cl.Broker(int(broker)))
	require.NoError(tc.t, err)
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

func TestInitProducerIDHandsOutIDsFromBlocksSharedByTheBrokers(t *testing.T) {
	tc := startCluster(t, nil)
	seen := map[int64]bool{}
	for _, id := range []int32{0, 1, 2, 0} {
		pid, epoch := tc.initProducerID(id)
		require.Zero(t, epoch)
		require.False(t, seen[pid], "producer id %d handed out twice", pid)
		seen[pid] = true
	}
	data, _, err := tc.States.Get(producer.BlockPath)
	require.NoError(t, err)
	require.Contains(t, string(data), `"block_start":"2000","block_end":"2999"`, "three brokers, three blocks")

	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr("payments")
	resp, err := req.RequestWith(context.Background(), tc.client(kgo.AllISRAcks()).Broker(0))
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode, "transactions are out of scope")
}

// TestApiVersionsAdvertisesInitProducerIDFromV0ToV4: every broker tells
// clients that it serves InitProducerId (key 22) at v0-v4: an idempotent
// client (franz-go, librdkafka, Sarama, Java) reads ApiVersions first and
// produces without idempotence, or fails, if key 22 is missing.
func TestApiVersionsAdvertisesInitProducerIDFromV0ToV4(t *testing.T) {
	tc := startCluster(t, nil)
	cl := tc.client(kgo.AllISRAcks())
	for _, id := range []int32{0, 1, 2} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "workbook-test", "1.0.0"
		resp, err := req.RequestWith(context.Background(), cl.Broker(int(id)))
		require.NoError(t, err)
		require.Zero(t, resp.ErrorCode)
		var found []kmsg.ApiVersionsResponseApiKey
		for _, k := range resp.ApiKeys {
			if k.ApiKey == kmsg.InitProducerID.Int16() {
				found = append(found, k)
			}
		}
		require.Len(t, found, 1, "broker %d advertises InitProducerId once", id)
		require.Equal(t, int16(0), found[0].MinVersion, "broker %d", id)
		require.Equal(t, int16(4), found[0].MaxVersion, "broker %d", id)
	}
}

// TestARetriedBatchIsAnsweredWithItsOriginalOffset: seed §1.4's retry after
// a failed acks=all send, made safe: the same batch sent again (its
// response was lost) is not appended twice; a gap and a zombie epoch are
// refused.
func TestARetriedBatchIsAnsweredWithItsOriginalOffset(t *testing.T) {
	tc := startCluster(t, nil)
	pid, epoch := tc.initProducerID(0)
	code, first := tc.produceIdempotent(pid, epoch, 0, 3)
	require.Zero(t, code)
	code, _ = tc.produceIdempotent(pid, epoch, 3, 2)
	require.Zero(t, code)
	end := tc.logEnd(0)

	code, again := tc.produceIdempotent(pid, epoch, 0, 3) // the retry
	require.Zero(t, code)
	require.Equal(t, first, again, "answered with the original offset")
	require.Equal(t, end, tc.logEnd(0), "and not appended again")

	code, _ = tc.produceIdempotent(pid, epoch, 9, 1)
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, code, "sequences 5-8 are missing")
	code, _ = tc.produceIdempotent(pid, epoch+1, 0, 1) // a new epoch starts at 0
	require.Zero(t, code)
	code, _ = tc.produceIdempotent(pid, epoch, 5, 1)
	require.Equal(t, kerr.InvalidProducerEpoch.Code, code, "the old epoch is fenced")
	require.Equal(t, end+1, tc.logEnd(0))
}

// TestLeaderMovesUnderAnIdempotentProducerLoseAndDuplicateNothing: the
// duplicate seed §1.4's retry would make, forced each round: franz-go
// (idempotent by default) produces with acks=all while one follower is
// paused, so its batches are appended and copied by the other follower but
// not acknowledged; the leadership then moves to that other follower, the
// old leader answers NOT_LEADER_OR_FOLLOWER, and franz-go retries on the new
// leader, which already has the batches. It learned the producer's state by
// replicating them, so it answers each retry with the original offsets:
// every record is there exactly once, in order. (Without the producer
// state, each round appends its batches twice.)
func TestLeaderMovesUnderAnIdempotentProducerLoseAndDuplicateNothing(t *testing.T) {
	tc := startCluster(t, map[string]string{"min.insync.replicas": "2"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(tc.Addrs()...), kgo.DefaultProduceTopic(tc.tp.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()

	var mu sync.Mutex
	var failed error
	var wg sync.WaitGroup
	next := 0
	produce := func(k int) {
		for range k {
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(strconv.Itoa(next))}, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err == nil && r.ProducerID < 0 {
					err = fmt.Errorf("record %s was produced without idempotence", r.Value)
				}
				if err != nil {
					failed = err
				}
			})
			next++
		}
	}
	leader := int32(0)
	for range 3 {
		successor, paused := (leader+1)%3, (leader+2)%3
		tc.server(paused).Replicas.PauseFetching(true)
		produce(50)
		require.Eventually(t, func() bool {
			end := tc.logEnd(leader)
			return end == int64(next) && tc.logEnd(successor) == end
		}, 20*time.Second, 5*time.Millisecond, "the successor copied every batch, none acknowledged")
		require.NoError(t, tc.Controller.ElectLeader(tc.tp, successor))
		tc.server(paused).Replicas.PauseFetching(false)
		wg.Wait() // the retries, answered by the new leader
		leader = successor
	}
	require.NoError(t, failed)

	read := tc.readAll()
	count := map[string]int{}
	for _, v := range read {
		count[v]++
	}
	dups := 0
	for _, c := range count {
		dups += c - 1
	}
	t.Logf("%d records acknowledged, %d read, %d duplicates", next, len(read), dups)
	require.Zero(t, dups, "no record appended twice")
	want := make([]string, next)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	require.Equal(t, want, read, "every record once, in order")
}

// TestProducerStateSurvivesARestartWithAndWithoutASnapshot: a clean
// shutdown writes a producer snapshot beside the segments; the restarted
// broker starts from it (or, without it, or with a damaged one, from the
// whole log) and still recognizes a retry of any of a producer's last five
// batches: a broker that stops may hold five appended and unacknowledged
// batches of a producer, which it retries oldest first. A snapshot keeps
// each producer's last batch only, as Kafka's does, so the clean shutdown
// takes it at the oldest of those five batches, and the restart reads them
// back from the log.
func TestProducerStateSurvivesARestartWithAndWithoutASnapshot(t *testing.T) {
	for _, tt := range []struct {
		name  string
		touch func(t *testing.T, path string)
	}{
		{"snapshot", func(*testing.T, string) {}},
		{"no snapshot", func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) }},
		{"damaged snapshot", func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o644)) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := startCluster(t, nil)
			pid, epoch := tc.initProducerID(0)
			var bases []int64
			for seq := int32(0); seq < 18; seq += 3 { // six batches of three: offsets 0-17
				code, base := tc.produceIdempotent(pid, epoch, seq, 3)
				require.Zero(t, code)
				bases = append(bases, base)
			}

			require.NoError(t, tc.StopBroker(0))
			snapshots := tc.snapshotFiles(0, tc.tp)
			require.Len(t, snapshots, 1, "one snapshot after a clean shutdown")
			require.Contains(t, snapshots, bases[1], "taken at the oldest of the last five batches, not at the log end (18)")
			tt.touch(t, filepath.Join(tc.LogDir(0), tc.tp.String(), producer.SnapshotFileName(bases[1])))
			require.NoError(t, tc.Controller.BrokerStopped(0))
			require.NoError(t, tc.StartBroker(0))
			require.NoError(t, tc.Controller.BrokerStarted(0))
			tc.waitISR(1, 2, 0)
			require.NoError(t, tc.Controller.ElectLeader(tc.tp, 0))

			for i := 1; i < len(bases); i++ {
				code, again := tc.produceIdempotent(pid, epoch, int32(3*i), 3)
				require.Zero(t, code, "retry of batch %d", i)
				require.Equal(t, bases[i], again, "the retry of batch %d (sequence %d) is recognized", i, 3*i)
			}
			code, _ := tc.produceIdempotent(pid, epoch, 0, 3)
			require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, code, "the sixth batch back is past the window, as in Kafka")
			code, _ = tc.produceIdempotent(pid, epoch, 19, 1)
			require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, code, "and the sequence goes on from 18")
		})
	}
}

// snapshotFiles reads a broker's producer snapshots for a partition, by
// offset.
func (tc *testCluster) snapshotFiles(id int32, tp commitlog.TopicPartition) map[int64][]byte {
	tc.t.Helper()
	dir := filepath.Join(tc.LogDir(id), tp.String())
	entries, err := os.ReadDir(dir)
	require.NoError(tc.t, err)
	out := map[int64][]byte{}
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".snapshot"); ok {
			offset, err := strconv.ParseInt(name, 10, 64)
			require.NoError(tc.t, err)
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(tc.t, err)
			out[offset] = data
		}
	}
	return out
}

// kill stops a broker as kill -9 would leave its disk: no clean-shutdown
// marker, and of the producer snapshots only those written at segment
// rolls (the harness stops the broker cleanly, then puts the files back as
// the crash left them; the page cache survives a killed process, so the
// logs keep every byte written). The controller hears of it.
func (tc *testCluster) kill(id int32, tps ...commitlog.TopicPartition) {
	tc.t.Helper()
	atCrash := map[commitlog.TopicPartition]map[int64][]byte{}
	for _, tp := range tps {
		atCrash[tp] = tc.snapshotFiles(id, tp)
	}
	require.NoError(tc.t, tc.CrashBroker(id, base.Crash{}))
	for _, tp := range tps {
		dir := filepath.Join(tc.LogDir(id), tp.String())
		for offset := range tc.snapshotFiles(id, tp) {
			require.NoError(tc.t, os.Remove(filepath.Join(dir, producer.SnapshotFileName(offset))))
		}
		for offset, data := range atCrash[tp] {
			require.NoError(tc.t, os.WriteFile(filepath.Join(dir, producer.SnapshotFileName(offset)), data, 0o644))
		}
	}
	require.NoError(tc.t, tc.Controller.BrokerStopped(id))
}

// TestProducerSnapshotsAtSegmentRollsSurviveACrash: every replica, leader
// and followers, writes a producer snapshot when its log rolls, named by
// the new segment's base offset, and keeps the two newest. A broker that
// crashes writes no snapshot at shutdown: it rebuilds its producer state
// from the last roll's snapshot and the batches after it, and, leading
// again, still recognizes a retry of the last batch.
func TestProducerSnapshotsAtSegmentRollsSurviveACrash(t *testing.T) {
	tc := startCluster(t, map[string]string{"log.segment.bytes": "1024"})
	pid, epoch := tc.initProducerID(0)
	var last int64
	for i := range 40 {
		code, base := tc.produceIdempotent(pid, epoch, int32(3*i), 3)
		require.Zero(t, code)
		last = base
	}

	for _, id := range []int32{0, 1, 2} {
		require.Eventually(t, func() bool {
			p, ok := tc.server(id).Replicas.Partition(tc.tp.Topic, tc.tp.Partition)
			require.True(t, ok)
			segs := p.Log.Segments()
			if len(segs) < 4 {
				return false
			}
			snaps := tc.snapshotFiles(id, tc.tp)
			return len(snaps) == 2 && snaps[segs[len(segs)-1].BaseOffset] != nil && snaps[segs[len(segs)-2].BaseOffset] != nil
		}, 10*time.Second, 10*time.Millisecond, "broker %d: snapshots at its last two segments", id)
	}

	tc.kill(0, tc.tp)
	require.NoError(t, tc.StartBroker(0))
	require.NoError(t, tc.Controller.BrokerStarted(0))
	tc.waitISR(1, 2, 0)
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 0))

	code, again := tc.produceIdempotent(pid, epoch, 3*39, 3)
	require.Zero(t, code)
	require.Equal(t, last, again, "the retry of the last batch is recognized")
	code, _ = tc.produceIdempotent(pid, epoch, 3*40+1, 1)
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, code, "and the sequence goes on from 120")
}

// TestTruncationTakesBatchesOutOfTheProducerState: a batch that only the
// leader had is cut from its log when the leadership moves to a broker
// without it and it follows (KIP-101), and from its producer state too.
// Led by that broker again, the producer's retry of the batch is
// appended, not answered with the offset the batch had before the cut
// (which another record holds now).
func TestTruncationTakesBatchesOutOfTheProducerState(t *testing.T) {
	tc := startCluster(t, nil)
	pid, epoch := tc.initProducerID(0)
	code, _ := tc.produceIdempotent(pid, epoch, 0, 3) // A, offsets 0-2, on all three
	require.Zero(t, code)

	tc.server(1).Replicas.PauseFetching(true)
	tc.server(2).Replicas.PauseFetching(true)
	code, lost := tc.produceIdempotentTo(0, 1, pid, epoch, 3, 3) // B, offsets 3-5, on broker 0 alone
	require.Zero(t, code)
	require.Equal(t, int64(3), lost)
	// The leadership moves to broker 1, which never had B (Jepsen's
	// story, on purpose); broker 0, running, follows it.
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 1))
	tc.server(1).Replicas.PauseFetching(false)
	tc.server(2).Replicas.PauseFetching(false)

	other, otherEpoch := tc.initProducerID(1)
	code, base := tc.produceIdempotentTo(1, 1, other, otherEpoch, 0, 1) // C takes offset 3 on the new leader
	require.Zero(t, code)
	require.Equal(t, int64(3), base)
	require.Eventually(t, func() bool { return tc.logEnd(0) == 4 }, 20*time.Second, 10*time.Millisecond,
		"broker 0 cut B and copied C")
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 0))

	code, retried := tc.produceIdempotent(pid, epoch, 3, 3)
	require.Zero(t, code)
	require.Equal(t, int64(4), retried, "B is appended after C, not taken for a duplicate at 3")
	require.Equal(t, []string{"seq-0", "seq-1", "seq-2", "seq-0", "seq-3", "seq-4", "seq-5"}, tc.readAll())
}
