package server_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// faultProps are the keys of the group fault tests' brokers: sessions as
// short as a test can afford (a member's session.timeout.ms may be 1 s).
var faultProps = map[string]string{"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}

// The environment of a group member run as a process of its own (this
// test binary, run again: see TestMain), so that a test can kill it.
const (
	memberEnvBrokers = "WORKBOOK_GROUP_MEMBER_BROKERS"
	memberEnvTopic   = "WORKBOOK_GROUP_MEMBER_TOPIC"
	memberEnvGroup   = "WORKBOOK_GROUP_MEMBER_GROUP"
)

// runGroupMember is the member process: a franz-go consumer in a group,
// with a 2 s session, that prints "owns p,p,..." whenever its partitions
// change, until it is killed.
func runGroupMember() {
	topic := os.Getenv(memberEnvTopic)
	var mu sync.Mutex
	owned := map[int32]bool{}
	report := func() {
		ps := make([]string, 0, len(owned))
		for _, p := range slices.Sorted(maps.Keys(owned)) {
			ps = append(ps, fmt.Sprint(p))
		}
		fmt.Printf("owns %s\n", strings.Join(ps, ","))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(os.Getenv(memberEnvBrokers), ",")...),
		kgo.ConsumeTopics(topic), kgo.ConsumerGroup(os.Getenv(memberEnvGroup)), kgo.SessionTimeout(2*time.Second),
		kgo.HeartbeatInterval(200*time.Millisecond), kgo.Balancers(kgo.RangeBalancer()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range a[topic] {
				owned[p] = true
			}
			report()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range r[topic] {
				delete(owned, p)
			}
			report()
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		cl.PollFetches(context.Background())
	}
}

// memberProcess is a group member running as its own process.
type memberProcess struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	owned string // its last "owns" line
}

// startMemberProcess starts a member process and waits until it owns
// some partition.
func startMemberProcess(t *testing.T, c *brokertest.Cluster, topic, group string) *memberProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memberEnvBrokers+"="+strings.Join(c.Addrs(), ","), memberEnvTopic+"="+topic, memberEnvGroup+"="+group)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	m := &memberProcess{cmd: cmd}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if owned, ok := strings.CutPrefix(s.Text(), "owns "); ok {
				m.mu.Lock()
				m.owned = owned
				m.mu.Unlock()
			}
		}
	}()
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.owned != ""
	}, 60*time.Second, 10*time.Millisecond, "the member process owns partitions")
	return m
}

// TestKilledMemberAndLeaderArePlacedByAnother: the group's first member,
// its leader, runs as a process of its own and is killed (kill -9: no
// LeaveGroup). Its session times out on the coordinator, which removes
// it and rebalances: one of the two franz-go members left becomes leader
// and assigns, and between them they own all six partitions. Then the
// new leader leaves cleanly (LeaveGroup): the last member leads and owns
// everything, long before any session could time out.
func TestKilledMemberAndLeaderArePlacedByAnother(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, faultProps)
	createTopic(t, c, "work", 6, nil)
	leader := startMemberProcess(t, c, "work", "crew") // alone, so it leads
	others := startFranzGoMembers(t, c, "work", "crew", 2, kgo.SessionTimeout(2*time.Second),
		kgo.HeartbeatInterval(200*time.Millisecond), kgo.Balancers(kgo.RangeBalancer()))
	waitOwnedByAll(t, others, 6, func() bool {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return leader.owned != ""
	})

	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	waitOwners(t, others, 6)
	t.Logf("the killed leader's partitions moved %v after the kill (session timeout 2 s)", time.Since(killed).Round(time.Millisecond))
	requireBrokerLog(t, c, `was_leader=true`)

	// The member that leads now leaves with LeaveGroup; the other one
	// must end up owning all six partitions, well within a session.
	first, second := others[0], others[1]
	left := time.Now()
	first.cl.LeaveGroup()
	require.Eventually(t, func() bool { return len(second.owned()) == 6 }, 10*time.Second, 10*time.Millisecond,
		"the last member owns every partition")
	t.Logf("after a LeaveGroup, the last member owned all partitions %v later", time.Since(left).Round(time.Millisecond))
}

// waitOwnedByAll waits until members plus one more (extra reports
// whether it owns some) split partitions, each member owning some.
func waitOwnedByAll(t *testing.T, members []*groupMember, partitions int, extra func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		n := 0
		for _, m := range members {
			owned := m.owned()
			if len(owned) == 0 {
				return false
			}
			n += len(owned)
		}
		return extra() && n < partitions
	}, 60*time.Second, 10*time.Millisecond, "every member owns partitions")
}

// requireBrokerLog waits until some broker's log has a line matching
// the substring want.
func requireBrokerLog(t *testing.T, c *brokertest.Cluster, want string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for id := range int32(3) {
			if strings.Contains(c.Broker(id).Log(), want) {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "a broker log line with %q", want)
}

// TestCommittedOffsetsSurviveKillingTheCoordinator: a consumer commits
// its position; the broker coordinating its group is killed (kill -9).
// Another broker becomes leader of the group's partition of
// __consumer_offsets, loads it, and answers the offset fetch with what
// was committed; a new member of the group resumes exactly there: it
// reads no record twice and skips none.
func TestCommittedOffsetsSurviveKillingTheCoordinator(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, faultProps)
	createTopic(t, c, "ledger", 3, nil)
	want := produceValues(t, c, "ledger", 3, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The first consumer reads about half, committing what it read.
	first := client(t, c, kgo.ConsumeTopics("ledger"), kgo.ConsumerGroup("auditors"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	read := map[string]bool{}
	for len(read) < len(want)/2 {
		fs := first.PollRecords(ctx, 20)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) { read[string(r.Value)] = true })
		require.NoError(t, first.CommitUncommittedOffsets(ctx))
	}
	adm := kadm.NewClient(client(t, c))
	// A broker whose metadata has not yet heard of __consumer_offsets
	// answers FindCoordinator with COORDINATOR_NOT_AVAILABLE, which is
	// retriable; under load that lasts longer than the client's retries.
	var before kadm.OffsetResponses
	require.Eventually(t, func() bool {
		offsets, err := adm.FetchOffsets(ctx, "auditors")
		if err != nil || offsets.Error() != nil {
			return false
		}
		before = offsets
		return true
	}, 30*time.Second, 100*time.Millisecond, "the coordinator answers the offsets")
	first.Close() // LeaveGroup: the group is Empty, its offsets stay

	coordinators := adm.FindGroupCoordinators(ctx, "auditors")
	require.NoError(t, coordinators.Error())
	coordinator := coordinators["auditors"].NodeID
	c.Broker(coordinator).Kill()
	killed := time.Now()

	require.Eventually(t, func() bool {
		fc := adm.FindGroupCoordinators(ctx, "auditors")
		return fc.Error() == nil && fc["auditors"].NodeID != coordinator
	}, 60*time.Second, 20*time.Millisecond, "a new coordinator")
	// A new admin client, as a user's next command would be: franz-go
	// keeps a coordinator it found for as long as the broker is in its
	// metadata, and this one's metadata still has the killed broker.
	fresh := kadm.NewClient(client(t, c))
	var after kadm.OffsetResponses
	require.Eventually(t, func() bool {
		var err error
		after, err = fresh.FetchOffsets(ctx, "auditors")
		return err == nil && after.Error() == nil
	}, 60*time.Second, 20*time.Millisecond, "the new coordinator answers the offset fetch")
	t.Logf("the new coordinator answered %v after the kill", time.Since(killed).Round(time.Millisecond))
	for _, o := range before.Offsets().Sorted() {
		got, ok := after.Lookup(o.Topic, o.Partition)
		require.True(t, ok, "partition %d's commit after failover", o.Partition)
		require.Equal(t, o.At, got.At, "partition %d's committed offset after failover", o.Partition)
	}

	second := client(t, c, kgo.ConsumeTopics("ledger"), kgo.ConsumerGroup("auditors"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for len(read) < len(want) {
		fs := second.PollRecords(ctx, 100)
		require.NoError(t, ctx.Err(), "read %d of %d", len(read), len(want))
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			require.False(t, read[v], "%s was committed before the failover, and read again", v)
			read[v] = true
		})
	}
	require.Len(t, read, len(want))
}
