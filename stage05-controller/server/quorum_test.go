package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// outage is how long the test keeps ZooKeeper without a quorum: longer
// than the brokers' session timeout (4 s) and than replica.lag.time.max.ms
// (2 s), so that whatever the brokers would do with ZooKeeper on a timer
// has had time to be tried, and failed.
const outage = 8 * time.Second

// TestBrokersServeWhileZooKeeperHasNoQuorum: ZooKeeper holds the
// cluster's metadata, not its data. Three brokers serve a topic (6
// partitions, replication factor 3); two of the three ZooKeeper servers
// are killed, so the ensemble has no quorum and serves no client. For
// longer than a session timeout, each leader goes on taking produces with
// acks=all (every ISR member keeps fetching, and no leader can shrink an
// ISR, since that is a ZooKeeper write) and acks=1, and serves fetches: a
// consumer started during the outage, reading by partition, reads every
// record produced during it. When the servers come back, the brokers
// reconnect (with a new session if theirs expired, and register again),
// a controller is in office and acts: a topic created then gets a leader
// for every partition, and records go through it. (The sessions usually
// survive: a new ZooKeeper leader gives every session a fresh timeout,
// and the brokers are back within it. The controller, which stopped
// acting when it was cut off, must then take office again by itself: no
// /controller change or session expiry will tell it to.)
func TestBrokersServeWhileZooKeeperHasNoQuorum(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 3, nil)
	zk := observer(t, ens)
	all := func(id int32) bool { return id >= 0 && id < 3 }
	waitController(t, zk, all)

	const topic, partitions = "telemetry", 6
	adm := kadm.NewClient(client(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := adm.CreateTopics(ctx, partitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	require.NoError(t, err)
	require.NoError(t, created[topic].Err)
	waitLeaders(t, zk, topic, partitions, all)
	roundTrip(t, c, topic, partitions, "before", 10)

	// Both producers get their producer id (a ZooKeeper block behind
	// InitProducerId) and their metadata before the outage.
	acksAll := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(5*time.Second))
	acksOne := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProduceRequestTimeout(5*time.Second))
	for part := range int32(partitions) {
		require.NoError(t, acksAll.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("warm-all")}).FirstErr())
		require.NoError(t, acksOne.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("warm-one")}).FirstErr())
	}
	// Every partition starts the outage with its full ISR.
	require.Eventually(t, func() bool {
		for p := range int32(partitions) {
			s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
			if err != nil || len(s.ISR) != 3 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every ISR full before the outage")

	// The brokers' registrations before the outage: a broker whose
	// session expires registers again, at a newer broker epoch.
	epochs := map[int32]int64{}
	bs, err := zk.Brokers()
	require.NoError(t, err)
	for _, b := range bs {
		epochs[b.ID] = b.Epoch
	}

	// The quorum goes: the leader and one follower are killed; the
	// survivor stops serving clients.
	leader := ens.Leader()
	other := (leader + 1) % 3
	survivor := 3 - leader - other
	down := time.Now()
	ens.Kill(leader)
	ens.Kill(other)
	zktest.WaitFor(t, 30*time.Second, "the survivor to stop serving", func() bool { return !ens.Serving(survivor) })
	t.Logf("ZooKeeper without a quorum %v after the kills (servers %d and %d down, %d alone)",
		time.Since(down).Round(time.Millisecond), leader, other, survivor)

	// During the outage: produce, round after round, to every partition
	// with both producers, each record acknowledged before the next.
	var want []string
	rounds := 0
	pctx, pcancel := context.WithTimeout(context.Background(), outage+30*time.Second)
	defer pcancel()
	for time.Since(down) < outage {
		for part := range int32(partitions) {
			va := fmt.Sprintf("outage-all-%d-%d", part, rounds)
			vo := fmt.Sprintf("outage-one-%d-%d", part, rounds)
			require.NoError(t, acksAll.ProduceSync(pctx, &kgo.Record{Partition: part, Value: []byte(va)}).FirstErr(),
				"acks=all to partition %d, %v into the outage", part, time.Since(down).Round(time.Millisecond))
			require.NoError(t, acksOne.ProduceSync(pctx, &kgo.Record{Partition: part, Value: []byte(vo)}).FirstErr(),
				"acks=1 to partition %d, %v into the outage", part, time.Since(down).Round(time.Millisecond))
			want = append(want, va, vo)
		}
		rounds++
	}
	produced := time.Since(down)

	// A consumer that starts now, reading by partition from the start,
	// reads them all back, each once.
	offsets := map[int32]kgo.Offset{}
	for p := range int32(partitions) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons := client(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond))
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	var got []string
	for len(got) < len(want) {
		fs := cons.PollFetches(rctx)
		require.NoError(t, rctx.Err(), "read %d of the %d records produced during the outage", len(got), len(want))
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if strings.HasPrefix(v, "outage-") {
				require.True(t, strings.HasPrefix(v, fmt.Sprintf("outage-all-%d-", r.Partition)) ||
					strings.HasPrefix(v, fmt.Sprintf("outage-one-%d-", r.Partition)), "record %s read from partition %d", v, r.Partition)
				got = append(got, v)
			}
		})
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got, "every record produced during the outage read back once")
	require.False(t, ens.Serving(survivor), "ZooKeeper was without a quorum all along")
	t.Logf("without a ZooKeeper quorum: %d records (%d rounds over %d partitions, acks=all and acks=1) produced in %v and read back %v after the kills",
		len(want), rounds, partitions, produced.Round(time.Millisecond), time.Since(down).Round(time.Millisecond))
	for _, id := range []int32{0, 1, 2} {
		require.True(t, c.Broker(id).Running(), "broker %d runs", id)
	}

	// The quorum returns.
	ens.Start(leader)
	ens.Start(other)
	ens.WaitServing()
	back := time.Now()
	t.Logf("ZooKeeper serving again %v after the kills", time.Since(down).Round(time.Millisecond))

	// Every broker is registered again, and a controller is in office.
	require.Eventually(t, func() bool {
		bs, err = zk.Brokers()
		return err == nil && len(bs) == 3
	}, 60*time.Second, 10*time.Millisecond, "the three brokers registered again")
	var again []int32
	for _, b := range bs {
		if b.Epoch != epochs[b.ID] {
			again = append(again, b.ID)
		}
	}
	slices.Sort(again)
	ctrl := waitController(t, zk, all)
	t.Logf("after the quorum returned: three brokers registered (registered again, after a new session: %v) and /controller names broker %d after %v",
		again, ctrl, time.Since(back).Round(time.Millisecond))

	// The controller acts: a new topic gets a leader for every partition.
	const fresh = "after-quorum"
	require.Eventually(t, func() bool {
		created, err := adm.CreateTopics(ctx, partitions, 3, nil, fresh)
		if err != nil {
			return false
		}
		err = created[fresh].Err
		return err == nil || errors.Is(err, kerr.TopicAlreadyExists)
	}, 60*time.Second, 100*time.Millisecond, "topic %s created", fresh)
	// Only an acting controller gives the new partitions their state
	// znodes and leaders.
	require.Eventually(t, func() bool {
		for p := range int32(partitions) {
			s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: fresh, Partition: p})
			if err != nil || !all(s.Leader) {
				return false
			}
		}
		return true
	}, 60*time.Second, 5*time.Millisecond,
		"no controller acts after the quorum returned: partitions of %s created then get no leader (/controller names broker %d)", fresh, ctrl)
	t.Logf("after the quorum returned: every partition of the new topic led %v later", time.Since(back).Round(time.Millisecond))
	roundTrip(t, c, fresh, partitions, "fresh", 10)
	// And the old topic goes on.
	roundTrip(t, c, topic, partitions, "after", 10)
}
