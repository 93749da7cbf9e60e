package group_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

type offsets = map[string]map[int32]int64

func TestOffsetCommitByMemberOfStableGroup(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m := newMember()
	stableGroup(t, c, testGroup, m)

	require.Equal(t, map[string]map[int32]int16{"t1": {0: 0, 1: 0}},
		commit(t, c, testGroup, m, offsets{"t1": {0: 10, 1: 20}}, "where I was"))
	require.Equal(t, offsets{"t1": {0: 10, 1: 20}}, committed(t, c, testGroup))

	// OffsetFetch of named partitions: one never committed answers -1.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, testGroup
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t1", Partitions: []int32{1, 2}}}
	resp := c.OffsetFetch(req)
	require.Zero(t, resp.ErrorCode)
	ps := resp.Topics[0].Partitions
	require.Equal(t, int64(20), ps[0].Offset)
	require.Equal(t, int32(7), ps[0].LeaderEpoch)
	require.Equal(t, "where I was", *ps[0].Metadata)
	require.Equal(t, int64(-1), ps[1].Offset)
	require.Equal(t, int32(-1), ps[1].LeaderEpoch)
}

// A commit with generation -1 and no member id (an admin tool, or a
// consumer assigning itself partitions) is accepted while the group is
// Empty, and creates the group; not while it has members.
func TestSimpleConsumerCommitsWithGenerationMinusOneWhileEmpty(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)

	require.Equal(t, map[string]map[int32]int16{"t1": {0: 0}}, commit(t, c, "simple", nil, offsets{"t1": {0: 5}}, ""))
	require.Equal(t, offsets{"t1": {0: 5}}, committed(t, c, "simple"))
	require.Equal(t, "Empty", describe(t, c, "simple").State)

	stableGroup(t, c, testGroup, newMember())
	require.Equal(t, map[string]map[int32]int16{"t1": {0: kerr.UnknownMemberID.Code}}, commit(t, c, testGroup, nil, offsets{"t1": {0: 5}}, ""))
	require.Empty(t, committed(t, c, testGroup))
}

func TestOffsetCommitRefusesStaleAndUnknownMembersAndCommitsDuringAssignment(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2 := newMember(), newMember()
	stableGroup(t, c, testGroup, m1, m2)
	one := offsets{"t1": {0: 1}}
	codeOf := func(m *member, groupID string) string {
		return code(commit(t, c, groupID, m, one, "")["t1"][0])
	}

	stale := *m1
	stale.gen--
	require.Equal(t, code(kerr.IllegalGeneration.Code), codeOf(&stale, testGroup))
	stranger := *m1
	stranger.id = "stranger"
	require.Equal(t, code(kerr.UnknownMemberID.Code), codeOf(&stranger, testGroup))
	require.Equal(t, code(kerr.IllegalGeneration.Code), codeOf(m1, "no-such-group"), "Kafka: a generation for a group it does not know")

	// PreparingRebalance: an eager consumer commits before giving its
	// partitions up, so the commit of the current generation is taken.
	m3 := newMember()
	getID(t, c, testGroup, m3)
	j3 := joinAsync(c, testGroup, m3)
	require.Equal(t, "PreparingRebalance", describe(t, c, testGroup).State)
	require.Equal(t, "NONE", codeOf(m1, testGroup))

	// CompletingRebalance: the partitions are about to move.
	j1, j2 := joinAsync(c, testGroup, m1), joinAsync(c, testGroup, m2)
	adopt(m1, await(t, j1))
	adopt(m2, await(t, j2))
	adopt(m3, await(t, j3))
	require.Equal(t, "CompletingRebalance", describe(t, c, testGroup).State)
	require.Equal(t, code(kerr.RebalanceInProgress.Code), codeOf(m2, testGroup))
	require.Equal(t, offsets{"t1": {0: 1}}, committed(t, c, testGroup))
}

// offset.metadata.max.bytes: a partition whose metadata is longer answers
// OFFSET_METADATA_TOO_LARGE and is not committed; the others of the same
// request are.
func TestOffsetCommitMetadataTooLarge(t *testing.T) {
	h := newHarness(t, func(cfg *group.Config) { cfg.MetadataMaxBytes = 8 })
	c := h.coordinator(1)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "simple", -1
	short, long := "12345678", "123456789"
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t1", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 3, LeaderEpoch: -1, Metadata: &short},
		{Partition: 1, Offset: 4, LeaderEpoch: -1, Metadata: &long},
	}}}
	ch := make(chan *kmsg.OffsetCommitResponse, 1)
	c.OffsetCommit(req, func(resp *kmsg.OffsetCommitResponse) { ch <- resp })
	require.Equal(t, map[string]map[int32]int16{"t1": {0: 0, 1: kerr.OffsetMetadataTooLarge.Code}}, commitCodes(await(t, ch)))
	require.Equal(t, offsets{"t1": {0: 3}}, committed(t, c, "simple"))
}

// OffsetFetch v8 asks for several groups at once, each with its topics or
// (nil) all of them.
func TestOffsetFetchV8BatchesGroups(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	commit(t, c, "a", nil, offsets{"t1": {0: 1, 1: 2}, "t2": {0: 3}}, "")
	commit(t, c, "b", nil, offsets{"t1": {0: 4}}, "")

	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "a"}, // topics nil: all
		{Group: "b", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t1", Partitions: []int32{0, 5}}}},
		{Group: "unknown"},
	}
	resp := c.OffsetFetch(req)
	require.Len(t, resp.Groups, 3)
	got := map[string]offsets{}
	for _, g := range resp.Groups {
		require.Zero(t, g.ErrorCode, g.Group)
		got[g.Group] = offsets{}
		for _, rt := range g.Topics {
			got[g.Group][rt.Topic] = map[int32]int64{}
			for _, rp := range rt.Partitions {
				got[g.Group][rt.Topic][rp.Partition] = rp.Offset
			}
		}
	}
	require.Equal(t, map[string]offsets{
		"a":       {"t1": {0: 1, 1: 2}, "t2": {0: 3}},
		"b":       {"t1": {0: 4, 5: -1}},
		"unknown": {},
	}, got)
	require.Equal(t, "t1", resp.Groups[0].Topics[0].Topic, "topics sorted")
}

// A commit is applied and answered only once its append is acknowledged
// (acks=all); a failed append answers the produce error mapped to what a
// group client acts on, and nothing is applied.
func TestOffsetCommitWaitsForTheAppendAndAppliesNothingIfItFails(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	commit(t, c, "simple", nil, offsets{"t1": {0: 1}}, "")

	h.w.holdAcks()
	ch := commitAsync(c, "simple", nil, offsets{"t1": {0: 2}}, "")
	require.Eventually(t, func() bool { return h.w.heldAcks() == 1 }, waitFor, tick)
	noAnswerYet(t, ch, "a commit not yet acknowledged")
	require.Equal(t, offsets{"t1": {0: 1}}, committed(t, c, "simple"), "not applied before the ISR has it")
	h.w.releaseAcks()
	require.Zero(t, commitCodes(await(t, ch))["t1"][0])
	require.Equal(t, offsets{"t1": {0: 2}}, committed(t, c, "simple"))

	for produce, want := range map[int16]int16{
		kerr.NotEnoughReplicas.Code:            kerr.CoordinatorNotAvailable.Code,
		kerr.NotEnoughReplicasAfterAppend.Code: kerr.CoordinatorNotAvailable.Code,
		kerr.RequestTimedOut.Code:              kerr.CoordinatorNotAvailable.Code,
		kerr.UnknownTopicOrPartition.Code:      kerr.CoordinatorNotAvailable.Code,
		kerr.NotLeaderForPartition.Code:        kerr.NotCoordinator.Code,
		kerr.KafkaStorageError.Code:            kerr.NotCoordinator.Code,
		kerr.MessageTooLarge.Code:              kerr.InvalidCommitOffsetSize.Code,
		kerr.RecordListTooLarge.Code:           kerr.InvalidCommitOffsetSize.Code,
		kerr.CorruptMessage.Code:               kerr.UnknownServerError.Code,
	} {
		h.w.failWith(produce)
		got := commit(t, c, "simple", nil, offsets{"t1": {0: 99}}, "")["t1"][0]
		require.Equal(t, code(want), code(got), "produce error %s", code(produce))
	}
	h.w.failWith(0)
	require.Equal(t, offsets{"t1": {0: 2}}, committed(t, c, "simple"))
}

// DeleteGroups: a group with members answers NON_EMPTY_GROUP, an unknown
// one GROUP_ID_NOT_FOUND; an Empty group and its offsets are deleted with
// tombstones, so that a new leader loading the log does not bring them
// back.
func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	stableGroup(t, c, "busy", newMember())
	commit(t, c, "idle", nil, offsets{"t1": {0: 1, 1: 2}}, "")
	commit(t, c, "kept", nil, offsets{"t1": {0: 3}}, "")

	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"busy", "idle", "nope"}
	ch := make(chan *kmsg.DeleteGroupsResponse, 1)
	c.DeleteGroups(req, func(resp *kmsg.DeleteGroupsResponse) { ch <- resp })
	resp := await(t, ch)
	got := map[string]string{}
	for _, g := range resp.Groups {
		got[g.Group] = code(g.ErrorCode)
	}
	require.Equal(t, map[string]string{"busy": code(kerr.NonEmptyGroup.Code), "idle": "NONE", "nope": code(kerr.GroupIDNotFound.Code)}, got)
	require.Empty(t, committed(t, c, "idle"))
	require.Equal(t, "Dead", describe(t, c, "idle").State)
	require.NotContains(t, listGroups(t, c), "idle")

	c.Resigned(0)
	c2 := h.coordinator(2)
	require.Empty(t, committed(t, c2, "idle"), "tombstones: deleted offsets stay deleted")
	require.Equal(t, offsets{"t1": {0: 3}}, committed(t, c2, "kept"))
	require.Equal(t, map[string]string{"busy": "Stable", "kept": "Empty"}, listGroups(t, c2))
}

// OffsetDelete (KIP-496): offsets of topics the members subscribe to
// (their ConsumerMemberMetadata) answer GROUP_SUBSCRIBED_TO_TOPIC; the
// others are deleted, also for a new leader loading the log.
func TestOffsetDeleteSparesSubscribedTopics(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m := newMember()
	m.topics = []string{"t1"}
	stableGroup(t, c, testGroup, m)
	commit(t, c, testGroup, m, offsets{"t1": {0: 1}, "t2": {0: 2, 1: 3}}, "")

	resp := offsetDelete(t, c, testGroup, map[string][]int32{"t1": {0}, "t2": {0}, "t3": {0}})
	require.Zero(t, resp.ErrorCode)
	got := map[string]string{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			got[rt.Topic] = code(rp.ErrorCode)
		}
	}
	require.Equal(t, map[string]string{"t1": code(kerr.GroupSubscribedToTopic.Code), "t2": "NONE", "t3": "NONE"}, got)
	require.Equal(t, offsets{"t1": {0: 1}, "t2": {1: 3}}, committed(t, c, testGroup))

	require.Equal(t, code(kerr.GroupIDNotFound.Code), code(offsetDelete(t, c, "nope", map[string][]int32{"t1": {0}}).ErrorCode))

	c.Resigned(0)
	c2 := h.coordinator(2)
	require.Equal(t, offsets{"t1": {0: 1}, "t2": {1: 3}}, committed(t, c2, testGroup))
}

func offsetDelete(t *testing.T, c *group.Coordinator, groupID string, tps map[string][]int32) *kmsg.OffsetDeleteResponse {
	t.Helper()
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = groupID
	for topic, ps := range tps {
		rt := kmsg.OffsetDeleteRequestTopic{Topic: topic}
		for _, p := range ps {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
		}
		req.Topics = append(req.Topics, rt)
	}
	ch := make(chan *kmsg.OffsetDeleteResponse, 1)
	c.OffsetDelete(req, func(resp *kmsg.OffsetDeleteResponse) { ch <- resp })
	return await(t, ch)
}

// listGroups is ListGroups as group -> state, with an optional states filter.
func listGroups(t *testing.T, c *group.Coordinator, states ...string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	req.Version, req.StatesFilter = 4, states
	resp := c.ListGroups(req)
	require.Zero(t, resp.ErrorCode, code(resp.ErrorCode))
	out := map[string]string{}
	for _, g := range resp.Groups {
		out[g.Group] = g.GroupState
		if g.GroupState != "Empty" {
			require.Equal(t, "consumer", g.ProtocolType, g.Group)
		}
	}
	return out
}

func TestListGroupsFiltersByState(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1 := newMember()
	stableGroup(t, c, "stable", m1)
	commit(t, c, "empty", nil, offsets{"t1": {0: 1}}, "")
	// A group waiting for its leader's assignment.
	lone := newMember()
	getID(t, c, "completing", lone)
	join(t, c, "completing", lone)
	// A group waiting for a member to rejoin.
	p1, p2 := newMember(), newMember()
	stableGroup(t, c, "preparing", p1)
	getID(t, c, "preparing", p2)
	_ = joinAsync(c, "preparing", p2)

	require.Equal(t, map[string]string{"stable": "Stable", "empty": "Empty", "completing": "CompletingRebalance", "preparing": "PreparingRebalance"},
		listGroups(t, c))
	require.Equal(t, map[string]string{"stable": "Stable", "empty": "Empty"}, listGroups(t, c, "Stable", "Empty"))
	require.Equal(t, map[string]string{"preparing": "PreparingRebalance"}, listGroups(t, c, "PreparingRebalance"))
	require.Empty(t, listGroups(t, c, "Dead"))
	require.Equal(t, []string{p1.id, p2.id}, memberIDs(describe(t, c, "preparing")))
}
