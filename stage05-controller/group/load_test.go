package group_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// loadGate holds a coordinator's loading of a partition: the loader reads
// the clock as it starts, and the gate's clock blocks there until opened.
// No request path reads the clock before it answers
// COORDINATOR_LOAD_IN_PROGRESS, so only the loader waits.
type loadGate struct {
	armed   atomic.Bool
	reached chan struct{}
	open    chan struct{}
}

func newLoadGate() *loadGate {
	g := &loadGate{reached: make(chan struct{}, 1), open: make(chan struct{})}
	g.armed.Store(true)
	return g
}

func (g *loadGate) now() time.Time {
	if g.armed.Load() {
		select {
		case g.reached <- struct{}{}:
		default:
		}
		<-g.open
	}
	return time.Now()
}

func (g *loadGate) release() {
	g.armed.Store(false)
	close(g.open)
}

// A new leader of the partition (Kafka's onElection) answers
// COORDINATOR_LOAD_IN_PROGRESS until it has read the log; then it serves
// the Stable group with its members, assignments and offsets, and expires
// the members that do not heartbeat it.
func TestNewLeaderLoadsGroupsAndOffsetsFromTheLog(t *testing.T) {
	h := newHarness(t, nil)
	c1 := h.coordinator(1)
	m1, m2 := newMember().timeouts(shortTime, longTime), newMember().timeouts(shortTime, longTime)
	stableGroup(t, c1, testGroup, m1, m2)
	require.Equal(t, map[string]map[int32]int16{"t1": {0: 0, 1: 0}}, commit(t, c1, testGroup, m1, offsets{"t1": {0: 10, 1: 11}}, "meta"))
	commit(t, c1, "simple", nil, offsets{"t2": {3: 33}}, "")
	c1.Resigned(0)
	require.Equal(t, code(kerr.NotCoordinator.Code), code(heartbeat(c1, testGroup, m1)))
	require.Equal(t, code(kerr.NotCoordinator.Code), code(c1.Owns(testGroup)))

	gate := newLoadGate()
	c2 := h.coordinatorWith(group.Options{Now: gate.now})
	c2.Elected(0, 2, h.log)
	await(t, gate.reached)
	loading := code(kerr.CoordinatorLoadInProgress.Code)
	require.Equal(t, loading, code(c2.Owns(testGroup)))
	require.Equal(t, loading, code(heartbeat(c2, testGroup, m1)))
	require.Equal(t, loading, code(join(t, c2, testGroup, newMember()).ErrorCode))
	require.Equal(t, loading, code(describe(t, c2, testGroup).ErrorCode))
	require.Equal(t, loading, code(commit(t, c2, "simple", nil, offsets{"t2": {3: 34}}, "")["t2"][3]))
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 7, testGroup
	require.Equal(t, loading, code(c2.OffsetFetch(fetch).ErrorCode))
	require.Equal(t, loading, code(c2.ListGroups(kmsg.NewPtrListGroupsRequest()).ErrorCode))
	gate.release()
	h.waitLoaded(c2)

	d := describe(t, c2, testGroup)
	require.Zero(t, d.ErrorCode)
	require.Equal(t, "Stable", d.State)
	require.Equal(t, "consumer", d.ProtocolType)
	require.Equal(t, "range", d.Protocol)
	require.Equal(t, []string{m1.id, m2.id}, memberIDs(d))
	for i, m := range []*member{m1, m2} {
		require.Equal(t, assignmentOf(m.id), d.Members[i].MemberAssignment)
		require.Equal(t, subscription("t1"), d.Members[i].ProtocolMetadata)
		require.Equal(t, "client", d.Members[i].ClientID)
	}
	require.Equal(t, offsets{"t1": {0: 10, 1: 11}}, committed(t, c2, testGroup))
	require.Equal(t, offsets{"t2": {3: 33}}, committed(t, c2, "simple"))
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t1", Partitions: []int32{0}}}
	p := c2.OffsetFetch(fetch).Topics[0].Partitions[0]
	require.Equal(t, int32(7), p.LeaderEpoch)
	require.Equal(t, "meta", *p.Metadata)

	// The members kept their generation; a rejoin with the same
	// protocols by a follower is answered at once, in Stable.
	require.Equal(t, "NONE", code(heartbeat(c2, testGroup, m2)))
	r2 := join(t, c2, testGroup, m2)
	require.Zero(t, r2.ErrorCode, code(r2.ErrorCode))
	require.Equal(t, m1.gen, r2.Generation)
	require.Equal(t, m1.id, r2.LeaderID)

	// Nobody heartbeats the new leader now: the members expire.
	require.Eventually(t, func() bool { return describe(t, c2, testGroup).State == "Empty" }, waitFor, tick)
	require.Empty(t, describe(t, c2, testGroup).Members)
	require.Equal(t, code(kerr.UnknownMemberID.Code), code(heartbeat(c2, testGroup, m1)))
	require.Equal(t, offsets{"t1": {0: 10, 1: 11}}, committed(t, c2, testGroup), "offsets outlive the members")
}

// The replacement of a static member is stored before it is answered: a
// new leader knows the new member id and its assignment.
func TestNewLeaderKnowsTheReplacedStaticMember(t *testing.T) {
	h := newHarness(t, nil)
	c1 := h.coordinator(1)
	m1, s := newMember(), newMember().static("instance-s")
	stableGroup(t, c1, testGroup, m1, s)
	old := s.id
	restarted := newMember().static("instance-s")
	require.Zero(t, join(t, c1, testGroup, restarted).ErrorCode)
	c1.Resigned(0)

	c2 := h.coordinator(2)
	d := describe(t, c2, testGroup)
	require.Equal(t, []string{m1.id, restarted.id}, memberIDs(d))
	require.Equal(t, "instance-s", *d.Members[1].InstanceID)
	require.Equal(t, assignmentOf(old), d.Members[1].MemberAssignment)
	require.Equal(t, code(kerr.FencedInstanceID.Code), code(heartbeat(c2, testGroup, s)))
}

// Losing the partition's leadership (Kafka's onResignation): requests
// parked in its groups answer NOT_COORDINATOR, so that their clients look
// the coordinator up again, and so does every later request.
func TestResignedAnswersParkedRequestsWithNotCoordinator(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	// A JoinGroup parked, waiting for the others to rejoin.
	m1, m2 := newMember(), newMember()
	stableGroup(t, c, testGroup, m1)
	getID(t, c, testGroup, m2)
	parkedJoin := joinAsync(c, testGroup, m2)
	// A follower's SyncGroup parked, waiting for its leader's.
	f1, f2 := newMember(), newMember()
	getID(t, c, "other", f1)
	getID(t, c, "other", f2)
	join(t, c, "other", f1)
	j2 := joinAsync(c, "other", f2)
	join(t, c, "other", f1)
	adopt(f2, await(t, j2))
	parkedSync := syncAsync(c, "other", f2, nil)
	noAnswerYet(t, parkedJoin, "JoinGroup")
	noAnswerYet(t, parkedSync, "SyncGroup")
	// An election for the epoch already held is a repeat: nothing moves.
	c.Elected(0, 1, h.log)
	require.Equal(t, "NONE", code(c.Owns(testGroup)))
	noAnswerYet(t, parkedJoin, "JoinGroup after a repeated election")

	c.Resigned(0)
	notCoordinator := code(kerr.NotCoordinator.Code)
	require.Equal(t, notCoordinator, code(await(t, parkedJoin).ErrorCode))
	require.Equal(t, notCoordinator, code(await(t, parkedSync).ErrorCode))
	require.Equal(t, notCoordinator, code(heartbeat(c, testGroup, m1)))
	require.Equal(t, notCoordinator, code(describe(t, c, testGroup).ErrorCode))
	require.Equal(t, notCoordinator, code(join(t, c, testGroup, newMember()).ErrorCode))
	require.Equal(t, notCoordinator, code(commit(t, c, testGroup, m1, offsets{"t1": {0: 1}}, "")["t1"][0]))
	require.Empty(t, c.ListGroups(kmsg.NewPtrListGroupsRequest()).Groups)

	// Elected again, the partition is loaded again.
	c.Elected(0, 3, h.log)
	h.waitLoaded(c)
	require.Equal(t, "Stable", describe(t, c, testGroup).State)
}

// offsets.load.buffer.size smaller than a batch: the loader still makes
// progress (the log returns at least one whole batch, as Kafka's
// minOneMessage read does).
func TestLoadingReadsBatchesLargerThanTheLoadBuffer(t *testing.T) {
	h := newHarness(t, func(cfg *group.Config) { cfg.LoadBufferBytes = 64 })
	c1 := h.coordinator(1)
	many := offsets{"t1": {}}
	for p := range int32(20) {
		many["t1"][p] = int64(p) * 10
	}
	commit(t, c1, "simple", nil, many, "")
	commit(t, c1, "other", nil, offsets{"t2": {0: 1}}, "")
	c1.Resigned(0)

	c2 := h.coordinator(2)
	require.Equal(t, many, committed(t, c2, "simple"))
	require.Equal(t, offsets{"t2": {0: 1}}, committed(t, c2, "other"))
}

// Every load ends in serving the partition or in NOT_COORDINATOR, never in
// COORDINATOR_LOAD_IN_PROGRESS for ever. Here the controller bumps the
// partition's leader epoch (an ISR change, same leader) while the
// coordinator reads the log: the load already running belongs to this
// leadership and must be installed when it ends, as Kafka's
// addLoadingPartition lets the running load finish ("Already loading")
// and its finally block marks the partition owned.
func TestANewerEpochDuringALoadStillServesThePartition(t *testing.T) {
	h := newHarness(t, nil)
	c1 := h.coordinator(1)
	commit(t, c1, "simple", nil, offsets{"t1": {0: 5}}, "")
	c1.Resigned(0)

	gate := newLoadGate()
	c2 := h.coordinatorWith(group.Options{Now: gate.now})
	c2.Elected(0, 2, h.log)
	await(t, gate.reached)
	c2.Elected(0, 3, h.log) // the ISR shrank while the load ran
	require.Equal(t, code(kerr.CoordinatorLoadInProgress.Code), code(c2.Owns(testGroup)))
	gate.release()

	require.Eventually(t, func() bool { return c2.Owns(testGroup) == 0 }, waitFor, tick,
		"still %s after the load ended: the load of epoch 2 was dropped because the epoch moved to 3", code(c2.Owns(testGroup)))
	require.Equal(t, offsets{"t1": {0: 5}}, committed(t, c2, "simple"))
}

// A load that cannot read the log (here: the log was closed under it)
// gives the partition up, as Kafka's CoordinatorRuntime does (a failed
// load moves the partition to FAILED, whose requests answer
// NOT_COORDINATOR): its clients look for the coordinator again instead of
// retrying COORDINATOR_LOAD_IN_PROGRESS for ever. An election in the same
// epoch changes nothing; one in a newer epoch loads again, and serves.
func TestALoadThatCannotReadTheLogAnswersNotCoordinatorUntilANewerElection(t *testing.T) {
	h := newHarness(t, nil)
	c1 := h.coordinator(1)
	commit(t, c1, "simple", nil, offsets{"t1": {0: 5}}, "")
	c1.Resigned(0)
	require.NoError(t, h.log.Close())

	c2 := h.coordinatorWith(group.Options{})
	c2.Elected(0, 2, h.log)
	notCoordinator := code(kerr.NotCoordinator.Code)
	require.Eventually(t, func() bool { return code(c2.Owns(testGroup)) == notCoordinator }, waitFor, tick,
		"after a failed load: %s", code(c2.Owns(testGroup)))
	require.Equal(t, notCoordinator, code(join(t, c2, testGroup, newMember()).ErrorCode))
	require.Equal(t, notCoordinator, code(commit(t, c2, "simple", nil, offsets{"t1": {0: 6}}, "")["t1"][0]))
	require.Zero(t, c2.ListGroups(kmsg.NewPtrListGroupsRequest()).ErrorCode, "a failed partition is not loading")
	c2.Elected(0, 2, h.log)
	require.Equal(t, notCoordinator, code(c2.Owns(testGroup)), "the same epoch does not load again")

	reopened, err := commitlog.Open(h.log.Dir(), commitlog.DefaultConfig(), commitlog.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reopened.Close() })
	h.w.log = reopened
	c2.Elected(0, 3, reopened)
	h.waitLoaded(c2)
	require.Equal(t, offsets{"t1": {0: 5}}, committed(t, c2, "simple"))
}

// Losing the partition while it loads (Kafka's removeGroupsAndOffsets
// removes the loading mark) answers NOT_COORDINATOR at once, and the load,
// when it ends, installs nothing; elected again meanwhile, the newer load
// serves.
func TestResignedDuringALoadAnswersNotCoordinatorAndANewElectionServes(t *testing.T) {
	h := newHarness(t, nil)
	c1 := h.coordinator(1)
	commit(t, c1, "simple", nil, offsets{"t1": {0: 5}}, "")
	c1.Resigned(0)

	gate := newLoadGate()
	c2 := h.coordinatorWith(group.Options{Now: gate.now})
	c2.Elected(0, 2, h.log)
	await(t, gate.reached)
	c2.Resigned(0)
	require.Equal(t, code(kerr.NotCoordinator.Code), code(c2.Owns(testGroup)))
	gate.release()
	c2.Elected(0, 3, h.log)
	h.waitLoaded(c2)
	require.Equal(t, offsets{"t1": {0: 5}}, committed(t, c2, "simple"))
}
