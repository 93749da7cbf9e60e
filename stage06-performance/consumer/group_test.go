package consumer_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
)

func TestMain(m *testing.M) {
	brokertest.MainWith(m, "github.com/kafkaworkbook/workbook/stage06-performance/cmd/broker")
}

// commitsSurviveARestart is the scenario of the test: a consumer
// of a group reads about half of a topic and closes (committing what it
// returned); restart (nil, or a broker restart) happens; a new consumer
// of the same group resumes at the committed offsets: together they read
// every record exactly once.
func commitsSurviveARestart(t *testing.T, addr func() string, restart func()) {
	const topic, n = "resume", 3000
	createTopic(t, addr(), topic, 3)
	want := produce(t, addr(), topic, n, kgo.SnappyCompression())
	props := map[string]string{"group.id": "resumers", "max.poll.records": "100", "auto.commit.interval.ms": "50"}

	first := newConsumer(t, config(t, addr(), props))
	require.NoError(t, first.Subscribe(topic))
	got := pollUntil(t, deadline(t, 60*time.Second), first, n/2)
	stopped := map[int32]int64{}
	for p, recs := range got {
		stopped[p] = recs[len(recs)-1].Offset + 1
	}
	require.NoError(t, first.Close(deadline(t, 10*time.Second)))

	if restart != nil {
		restart()
	}

	second := newConsumer(t, config(t, addr(), props))
	require.NoError(t, second.Subscribe(topic))
	ctx := deadline(t, 60*time.Second)
	left := n
	for _, recs := range got {
		left -= len(recs)
	}
	firstSeen := map[int32]int64{}
	for read := 0; read < left; {
		recs, err := second.Poll(ctx)
		require.NoError(t, err, "read %d of %d after the restart", read, left)
		for i := range recs {
			r := &recs[i]
			if _, ok := firstSeen[r.Partition]; !ok {
				firstSeen[r.Partition] = r.Offset
			}
			got[r.Partition] = append(got[r.Partition], received(r))
		}
		read += len(recs)
	}
	for p, off := range firstSeen {
		if at, ok := stopped[p]; ok {
			require.Equal(t, at, off, "partition %d resumes at the committed offset", p)
		}
	}
	require.Equal(t, want, got, "every record once, in order")
}

// TestCommitsSurviveARestartOnKfake: the scenario against franz-go's
// in-memory cluster.
func TestCommitsSurviveARestartOnKfake(t *testing.T) {
	addr := startFake(t, 1)
	commitsSurviveARestart(t, func() string { return addr }, nil)
}

// TestCommitsSurviveARestartOfTheBroker: the scenario against a stage 06
// broker process (stage 05's group coordinator, offsets in
// __consumer_offsets), which is also stopped and started again between
// the two consumers: the offsets are read back from its log.
func TestCommitsSurviveARestartOfTheBroker(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 1, map[string]string{"group.initial.rebalance.delay.ms": "0",
		"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "3"})
	commitsSurviveARestart(t, func() string { return c.Addrs()[0] }, func() {
		c.Broker(0).Stop(30 * time.Second)
		c.Broker(0).Start()
	})
}

// TestGroupMembersSplitThePartitionsAndHandThemOver: two members of a
// group take two of four partitions each (range); when one closes, the
// other takes all four and reads the leaver's from where it committed.
// On kfake and through stage 05's coordinator in a stage 06 broker.
func TestGroupMembersSplitThePartitionsAndHandThemOver(t *testing.T) {
	t.Run("kfake", func(t *testing.T) { splitAndHandOver(t, startFake(t, 2)) })
	t.Run("stage06", func(t *testing.T) {
		ens := zktest.StartStandalone(t)
		c := brokertest.Start(t, ens, 1, map[string]string{"group.initial.rebalance.delay.ms": "0",
			"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "3"})
		splitAndHandOver(t, c.Addrs()[0])
	})
}

func splitAndHandOver(t *testing.T, addr string) {
	const topic, n = "split", 4000
	createTopic(t, addr, topic, 4)
	want := produce(t, addr, topic, n, kgo.NoCompression())
	props := map[string]string{"group.id": "splitters", "max.poll.records": "100"}

	stayer := newConsumer(t, config(t, addr, props))
	require.NoError(t, stayer.Subscribe(topic))
	require.Eventually(t, func() bool { return len(stayer.Assignment()) == 4 }, 30*time.Second, 10*time.Millisecond)
	leaver := newConsumer(t, config(t, addr, props))
	require.NoError(t, leaver.Subscribe(topic))
	require.Eventually(t, func() bool {
		a, b := stayer.Assignment(), leaver.Assignment()
		return len(a) == 2 && len(b) == 2 && len(slices.Concat(a, b)) == 4 && !slices.ContainsFunc(a, func(tp consumer.TopicPartition) bool {
			return slices.Contains(b, tp)
		})
	}, 30*time.Second, 10*time.Millisecond, "the two members split the four partitions")

	mine := leaver.Assignment()
	got := pollUntil(t, deadline(t, 30*time.Second), leaver, 500)
	for p := range got {
		require.True(t, slices.Contains(mine, consumer.TopicPartition{Topic: topic, Partition: p}), "the leaver reads only its partitions")
	}
	require.NoError(t, leaver.Close(deadline(t, 10*time.Second)))
	require.Eventually(t, func() bool { return len(stayer.Assignment()) == 4 }, 30*time.Second, 10*time.Millisecond,
		"the stayer takes the leaver's partitions")

	left := n
	for _, recs := range got {
		left -= len(recs)
	}
	rest := pollUntil(t, deadline(t, 30*time.Second), stayer, left)
	for p, recs := range rest {
		got[p] = append(got[p], recs...)
	}
	require.Equal(t, want, got, "every record once: the stayer resumed the leaver's partitions at their commits")
}

// TestAssignorsSplitLikeKafkas: range gives consecutive ranges per topic,
// the first members one more; roundrobin deals every partition in turn.
func TestAssignorsSplitLikeKafkas(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		want     string
	}{
		{"range", "a:t0-0,t0-1,t1-0,t1-1 b:t0-2,t1-2"},
		{"roundrobin", "a:t0-0,t0-2,t1-1 b:t0-1,t1-0,t1-2"},
	} {
		got := consumer.AssignForTest(tc.strategy, map[string][]string{"a": {"t0", "t1"}, "b": {"t0", "t1"}},
			map[string]int32{"t0": 3, "t1": 3})
		require.Equal(t, tc.want, strings.TrimSpace(got), tc.strategy)
	}
}

// TestAMemberThatStopsPollingLeavesAndComesBack: a member whose
// application spends max.poll.interval.ms outside Poll leaves the group
// (its heartbeats alone do not keep its partitions, KIP-62): the other
// member takes them all; at its next Poll it joins again and the two
// split them anew.
func TestAMemberThatStopsPollingLeavesAndComesBack(t *testing.T) {
	addr := startFake(t, 1)
	const topic = "stuck"
	createTopic(t, addr, topic, 2)
	produce(t, addr, topic, 100, kgo.NoCompression())
	props := map[string]string{"group.id": "stuckers", "max.poll.interval.ms": "1000"}
	ctx := deadline(t, 60*time.Second)

	// The busy member polls all the time, in the background.
	busy := newConsumer(t, config(t, addr, props))
	require.NoError(t, busy.Subscribe(topic))
	polling, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for polling.Err() == nil {
			busy.Poll(polling)
		}
	}()
	stuck := newConsumer(t, config(t, addr, props))
	require.NoError(t, stuck.Subscribe(topic))
	// The stuck member polls until it holds a partition, then stops.
	for len(stuck.Assignment()) != 1 || len(busy.Assignment()) != 1 {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		stuck.Poll(short)
		cancel()
		require.NoError(t, ctx.Err(), "the two members never split the partitions")
	}
	require.Eventually(t, func() bool { return len(stuck.Assignment()) == 0 && len(busy.Assignment()) == 2 },
		20*time.Second, 10*time.Millisecond, "the stuck member leaves; the busy one takes both partitions")

	for len(stuck.Assignment()) != 1 || len(busy.Assignment()) != 1 {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		stuck.Poll(short)
		cancel()
		require.NoError(t, ctx.Err(), "the stuck member never came back")
	}
}
