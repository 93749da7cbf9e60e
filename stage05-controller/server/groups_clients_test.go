package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// The group compatibility tests with clients other than franz-go: kcat
// (librdkafka, C) and Sarama (Go). Each checks the coordinator's view
// (DescribeGroups through kadm) against what the clients say and read.
//
// WORKBOOK_TRANSCRIPT=1 makes the kcat test log its command lines, the
// first lines each kcat printed, the group as DescribeGroups shows it and
// the coordinator's log lines about the group, for chapter 5:
//
//	WORKBOOK_TRANSCRIPT=1 go test ./server -run TestKcatGroup -v

// TestKcatGroupMembersShareEveryPartitionOnce: three kcat processes
// (librdkafka's balanced consumer, `kcat -G`) in one group split a
// 6-partition topic: DescribeGroups shows the group Stable with three
// members whose consumer assignments cover each partition exactly once,
// each kcat prints only records of its own partitions, together they
// print every record exactly once, and once stopped (SIGTERM) they have
// left the group.
func TestKcatGroupMembersShareEveryPartitionOnce(t *testing.T) {
	kcat := kcatBinary(t)
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, groupProps)
	const topic, group, partitions = "events-kcat", "g-kcat", 6
	createTopic(t, c, topic, partitions, nil)

	procs := make([]*kcatMember, 3)
	for i := range procs {
		procs[i] = startKcatMember(t, kcat, c, group, topic, fmt.Sprintf("kcat-%d", i+1))
	}
	described, owners := waitGroupAssigned(t, c, group, topic, partitions, kcatClientIDs(procs))
	// The records only once the group is stable, as in the franz-go test:
	// nothing is committed yet, so a partition that moved would be read
	// again from the beginning.
	want := produceValues(t, c, topic, partitions, 50)
	members := make([]*groupMember, len(procs))
	for i, k := range procs {
		members[i] = k.member
	}
	requireReadOnce(t, members, want)

	for _, k := range procs {
		k.stop(t)
	}
	requireReadOnce(t, members, want) // again, with the outputs complete
	for _, k := range procs {
		mine := owners[k.clientID]
		for _, l := range k.lines {
			p, value, ok := parseKcatLine(l)
			require.True(t, ok, "%s printed %q", k.clientID, l)
			require.Contains(t, mine, p, "%s printed a record of partition %d, assigned %v", k.clientID, p, mine)
			require.True(t, strings.HasPrefix(value, fmt.Sprintf("%s-%d-", topic, p)), "%s: %q is not a record of partition %d", k.clientID, value, p)
		}
	}
	requireGroupEmpty(t, c, group)
	requireLeft(t, c, described)

	if os.Getenv("WORKBOOK_TRANSCRIPT") == "1" {
		var b strings.Builder
		for _, k := range procs {
			fmt.Fprintf(&b, "$ %s\n", shellLine(k.args))
			for _, l := range k.lines[:min(3, len(k.lines))] {
				fmt.Fprintf(&b, "%s\n", l)
			}
			fmt.Fprintf(&b, "... %s\n\n", kcatSummary(k.lines))
		}
		b.WriteString(describeView(described, topic))
		fmt.Fprintf(&b, "\nbroker %d, the coordinator, logged:\n", described.Coordinator.NodeID)
		for l := range strings.Lines(c.Broker(described.Coordinator.NodeID).Log()) {
			if strings.Contains(l, "group="+group+" ") {
				b.WriteString(l)
			}
		}
		t.Logf("transcript:\n%s", b.String())
	}
}

// TestSaramaGroupMembersShareEveryPartitionOnce: three members of one
// Sarama ConsumerGroup, with the eager range strategy, split a 6-partition
// topic: the claims each one's Setup gets are the assignments
// DescribeGroups shows, each partition has exactly one owner, together
// they read every record exactly once, and once closed they have left the
// group. Sarama picks request versions from the Kafka version it is told:
// as Kafka 2.8 it sends JoinGroup v7, LeaveGroup v4 and OffsetFetch v7;
// as Kafka 3.9 (the last with ZooKeeper) JoinGroup v8 and LeaveGroup v5
// with their reasons (KIP-800) and the batched OffsetFetch v8 (KIP-709).
func TestSaramaGroupMembersShareEveryPartitionOnce(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, groupProps)
	for _, version := range []sarama.KafkaVersion{sarama.V2_8_0_0, sarama.V3_9_0_0} {
		t.Run(version.String(), func(t *testing.T) {
			const partitions = 6
			topic, group := "events-sarama-"+version.String(), "g-sarama-"+version.String()
			createTopic(t, c, topic, partitions, nil)
			procs := make([]*saramaMember, 3)
			ids := make([]string, len(procs))
			members := make([]*groupMember, len(procs))
			for i := range procs {
				ids[i] = fmt.Sprintf("sarama-%d", i+1)
				procs[i] = startSaramaMember(t, c, version, group, topic, ids[i])
				members[i] = procs[i].member
			}
			waitOwners(t, members, partitions)
			described, owners := waitGroupAssigned(t, c, group, topic, partitions, ids)
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				for i, m := range members {
					assert.Equal(ct, owners[ids[i]], m.owned(), "%s: Setup's claims against DescribeGroups", ids[i])
				}
			}, 30*time.Second, 20*time.Millisecond)

			want := produceValues(t, c, topic, partitions, 50)
			requireReadOnce(t, members, want)
			for _, s := range procs {
				s.stop(t)
			}
			requireReadOnce(t, members, want) // again, with the members closed
			requireGroupEmpty(t, c, group)
			requireLeft(t, c, described)
		})
	}
}

// kcatBinary is the path of kcat (stage 02's kcatPath, in this package).
func kcatBinary(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: `make test` installs it (apt-get install kcat)")
	}
	return path
}

// kcatMember is one `kcat -G` process.
type kcatMember struct {
	clientID string
	args     []string // the command line, for the transcript
	cmd      *exec.Cmd
	stderr   bytes.Buffer
	// member collects the values kcat printed, as they come.
	member *groupMember
	// scanned is closed when kcat's output has ended (it exited).
	scanned chan struct{}
	// lines is everything kcat printed. Written by the scanning goroutine
	// only; read once scanned is closed.
	lines   []string
	stopped sync.Once
}

// kcatFormat prints one consumed record a line: its partition, offset and
// value (kcat reads `\n` in a format as a newline).
const kcatFormat = `partition %p, offset %o: %s\n`

// startKcatMember starts kcat as a member of group, reading topic from the
// beginning, with quick sessions and fetches.
func startKcatMember(t *testing.T, kcat string, c *brokertest.Cluster, group, topic, clientID string) *kcatMember {
	t.Helper()
	k := &kcatMember{clientID: clientID, member: &groupMember{assigned: map[int32]bool{}}, scanned: make(chan struct{})}
	k.args = []string{"kcat", "-b", strings.Join(c.Addrs(), ","), "-G", group, topic,
		"-o", "beginning", "-f", kcatFormat, "-q", "-u",
		"-X", "client.id=" + clientID,
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", "-X", "fetch.wait.max.ms=100"}
	k.cmd = exec.Command(kcat, k.args[1:]...)
	k.cmd.Stderr = &k.stderr
	out, err := k.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, k.cmd.Start())
	go func() {
		defer close(k.scanned)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			k.lines = append(k.lines, sc.Text())
			if _, value, ok := parseKcatLine(sc.Text()); ok {
				k.member.mu.Lock()
				k.member.values = append(k.member.values, value)
				k.member.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { k.stop(t) })
	return k
}

// stop ends kcat as a user would (SIGTERM: librdkafka closes the consumer,
// leaving the group) and waits for it; one that does not exit is killed.
func (k *kcatMember) stop(t *testing.T) {
	t.Helper()
	k.stopped.Do(func() {
		if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("%s: %v", k.clientID, err)
		}
		select {
		case <-k.scanned:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not exit on SIGTERM; killing it", k.clientID)
			_ = k.cmd.Process.Kill()
			<-k.scanned
		}
		err := k.cmd.Wait()
		require.NoError(t, err, "%s: %s", k.clientID, k.stderr.String())
		if k.stderr.Len() > 0 {
			t.Logf("%s stderr:\n%s", k.clientID, k.stderr.String())
		}
	})
}

func kcatClientIDs(procs []*kcatMember) []string {
	ids := make([]string, len(procs))
	for i, k := range procs {
		ids[i] = k.clientID
	}
	return ids
}

// parseKcatLine reads a line printed with kcatFormat.
func parseKcatLine(l string) (partition int32, value string, ok bool) {
	head, value, ok := strings.Cut(l, ": ")
	if !ok {
		return 0, "", false
	}
	var offset int64
	if _, err := fmt.Sscanf(head, "partition %d, offset %d", &partition, &offset); err != nil {
		return 0, "", false
	}
	return partition, value, true
}

// saramaMember is one member of a Sarama ConsumerGroup, consuming until
// stopped. Its groupMember holds the claims of its current session (set
// by Setup, cleared by Cleanup) and the values it read.
type saramaMember struct {
	clientID string
	group    sarama.ConsumerGroup
	member   *groupMember
	cancel   context.CancelFunc
	// done is closed when the consuming and the error-draining
	// goroutines have returned.
	done    chan struct{}
	errs    []error // what Errors() delivered; read once done is closed
	stopped sync.Once
}

// startSaramaMember starts a ConsumerGroup member speaking Kafka version,
// with the eager range strategy, reading from the oldest offset, with quick sessions and
// retries.
func startSaramaMember(t *testing.T, c *brokertest.Cluster, version sarama.KafkaVersion, group, topic, clientID string) *saramaMember {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = clientID
	cfg.Version = version
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup(c.Addrs(), group, cfg)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	s := &saramaMember{clientID: clientID, group: cg, member: &groupMember{assigned: map[int32]bool{}},
		cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() {
		for range cg.Errors() { // closed by Close
		}
	})
	errs := make(chan error, 1)
	wg.Go(func() {
		// Consume returns at the end of each session (a rebalance): join
		// again until stopped.
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, saramaHandler{s.member, topic}); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				select {
				case errs <- err:
				default:
				}
				select { // Consume's own retries have a backoff; this is the loop's
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	})
	go func() {
		wg.Wait()
		close(errs)
		for err := range errs {
			s.errs = append(s.errs, err)
		}
		close(s.done)
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop leaves the group (Close sends LeaveGroup after committing) and
// waits for the member's goroutines.
func (s *saramaMember) stop(t *testing.T) {
	t.Helper()
	s.stopped.Do(func() {
		s.cancel()
		require.NoError(t, s.group.Close(), s.clientID)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Consume did not return", s.clientID)
		}
		if len(s.errs) > 0 {
			t.Logf("%s: Consume returned %v", s.clientID, s.errs)
		}
	})
}

// saramaHandler records a session's claims and the values it reads.
type saramaHandler struct {
	m     *groupMember
	topic string
}

func (h saramaHandler) Setup(sess sarama.ConsumerGroupSession) error {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	clear(h.m.assigned)
	for _, p := range sess.Claims()[h.topic] {
		h.m.assigned[p] = true
	}
	return nil
}

func (h saramaHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	clear(h.m.assigned)
	return nil
}

func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.m.mu.Lock()
		h.m.values = append(h.m.values, string(msg.Value))
		h.m.mu.Unlock()
		sess.MarkMessage(msg, "")
	}
	return nil
}

// waitGroupAssigned waits until DescribeGroups shows group Stable, with a
// member for each of clientIDs and no other, every member's assignment a
// consumer assignment of some of topic's partitions, and every partition
// assigned exactly once. It returns that view, and each client's
// partitions.
func waitGroupAssigned(t *testing.T, c *brokertest.Cluster, group, topic string, partitions int32, clientIDs []string) (kadm.DescribedGroup, map[string][]int32) {
	t.Helper()
	adm := kadm.NewClient(client(t, c))
	var described kadm.DescribedGroup
	var owners map[string][]int32
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		groups, err := adm.DescribeGroups(ctx, group)
		if !assert.NoError(ct, err) {
			return
		}
		g := groups[group]
		if !assert.NoError(ct, g.Err) || !assert.Equal(ct, "Stable", g.State) ||
			!assert.Equal(ct, "consumer", g.ProtocolType) || !assert.Len(ct, g.Members, len(clientIDs)) {
			return
		}
		owners = map[string][]int32{}
		count := map[int32]int{}
		for _, m := range g.Members {
			a, ok := m.Assigned.AsConsumer()
			if !assert.True(ct, ok, "%s's assignment decodes as a consumer's", m.ClientID) {
				return
			}
			for _, at := range a.Topics {
				if !assert.Equal(ct, topic, at.Topic, "%s is assigned another topic", m.ClientID) {
					return
				}
				owners[m.ClientID] = append(owners[m.ClientID], at.Partitions...)
				for _, p := range at.Partitions {
					count[p]++
				}
			}
			slices.Sort(owners[m.ClientID])
			assert.NotEmpty(ct, owners[m.ClientID], "%s owns no partition", m.ClientID)
		}
		assert.ElementsMatch(ct, clientIDs, slices.Collect(maps.Keys(owners)), "the members' client ids")
		for p := range partitions {
			assert.Equal(ct, 1, count[p], "owners of partition %d", p)
		}
		assert.Len(ct, count, int(partitions), "partitions assigned")
		described = g
	}, 60*time.Second, 50*time.Millisecond, "group %s stable, each of %d partitions assigned once", group, partitions)
	return described, owners
}

// requireGroupEmpty waits until group has no members left.
func requireGroupEmpty(t *testing.T, c *brokertest.Cluster, group string) {
	t.Helper()
	adm := kadm.NewClient(client(t, c))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		groups, err := adm.DescribeGroups(ctx, group)
		if assert.NoError(ct, err) && assert.NoError(ct, groups[group].Err) {
			assert.Equal(ct, "Empty", groups[group].State)
			assert.Empty(ct, groups[group].Members)
		}
	}, 30*time.Second, 50*time.Millisecond, "group %s empty", group)
}

// requireLeft requires that the coordinator removed each member of g
// because it left (LeaveGroup), not because its session timed out, as
// the brokers' logs say.
func requireLeft(t *testing.T, c *brokertest.Cluster, g kadm.DescribedGroup) {
	t.Helper()
	var logs strings.Builder
	for id := range int32(3) {
		logs.WriteString(c.Broker(id).Log())
	}
	for _, m := range g.Members {
		want := fmt.Sprintf(`group=%s member=%s reason="left the group"`, g.Group, m.MemberID)
		require.True(t, strings.Contains(logs.String(), want), "%s left: no broker log line with %s", m.ClientID, want)
	}
}

// describeView is a group as kafka-consumer-groups.sh --describe --members
// --verbose would show it.
func describeView(g kadm.DescribedGroup, topic string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "DescribeGroups %s: state %s, protocol type %s, protocol %s, coordinator broker %d\n",
		g.Group, g.State, g.ProtocolType, g.Protocol, g.Coordinator.NodeID)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER-ID\tCLIENT-ID\tHOST\tASSIGNMENT")
	for _, m := range g.Members {
		var parts []string
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range a.Topics {
				for _, p := range at.Partitions {
					parts = append(parts, strconv.Itoa(int(p)))
				}
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s(%s)\n", m.MemberID, m.ClientID, m.ClientHost, topic, strings.Join(parts, ","))
	}
	_ = w.Flush()
	return b.String()
}

// kcatSummary says how many records of each partition lines show.
func kcatSummary(lines []string) string {
	per := map[int32]int{}
	for _, l := range lines {
		if p, _, ok := parseKcatLine(l); ok {
			per[p]++
		}
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(per)) {
		parts = append(parts, fmt.Sprintf("partition %d: %d records", p, per[p]))
	}
	return fmt.Sprintf("(%d lines in all; %s)", len(lines), strings.Join(parts, ", "))
}

// shellLine is args as one would type them in a shell.
func shellLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " %\\'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
