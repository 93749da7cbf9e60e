package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// build 05.G: committed offsets: OffsetCommit after the append, OffsetFetch, DeleteGroups, OffsetDelete
// tests: TestOffsetCommitByMemberOfStableGroup, TestSimpleConsumerCommitsWithGenerationMinusOneWhileEmpty, TestOffsetCommitRefusesStaleAndUnknownMembersAndCommitsDuringAssignment, TestOffsetCommitWaitsForTheAppendAndAppliesNothingIfItFails, TestOffsetFetchV8BatchesGroups, TestDeleteGroups

// OffsetCommit handles an OffsetCommit request: the offsets are appended
// to the group's partition of __consumer_offsets with acks=all, and only
// then applied and acknowledged. A member commits with its generation; a
// commit with generation -1 and no member id (an admin tool, or a
// consumer without a group) is accepted while the group is Empty.
// respond is called once, possibly from another goroutine.
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest, respond func(*kmsg.OffsetCommitResponse)) {
	resp := kmsg.NewPtrOffsetCommitResponse()
	fill := func(code func(p kmsg.OffsetCommitRequestTopicPartition) int16) {
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code(p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	all := func(code int16) func(kmsg.OffsetCommitRequestTopicPartition) int16 {
		return func(kmsg.OffsetCommitRequestTopicPartition) int16 { return code }
	}
	simple := req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil
	g, code := c.lookup(req.Group, simple)
	switch {
	case code != 0:
		fill(all(code))
		respond(resp)
		return
	case g == nil:
		fill(all(kerr.IllegalGeneration.Code))
		respond(resp)
		return
	}
	defer g.unlock()
	if code := c.checkCommit(g, req, simple); code != 0 {
		fill(all(code))
		reply(g, respond, resp)
		return
	}
	now := c.now().UnixMilli()
	var keys, values [][]byte
	commits := map[commitlog.TopicPartition]Offset{}
	fill(func(p kmsg.OffsetCommitRequestTopicPartition) int16 {
		if p.Metadata != nil && len(*p.Metadata) > c.cfg.MetadataMaxBytes {
			return kerr.OffsetMetadataTooLarge.Code
		}
		return 0
	})
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if resp.Topics[i].Partitions[j].ErrorCode != 0 {
				continue
			}
			tp := commitlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			o := Offset{Offset: p.Offset, LeaderEpoch: -1, CommitTime: now, ExpireTime: -1}
			if req.Version >= 6 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			if req.Version == 1 && p.Timestamp >= 0 { // v1 lets the client name the commit time
				o.CommitTime = p.Timestamp
			}
			commits[tp] = o
			keys, values = append(keys, offsetKey(g.id, tp)), append(values, offsetValue(o))
		}
	}
	if len(keys) == 0 {
		reply(g, respond, resp)
		return
	}
	c.store(g, keys, values, func(code int16) {
		if code == 0 {
			g.lock()
			for tp, o := range commits {
				g.offsets[tp] = o
			}
			g.unlock()
		}
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				if _, ok := commits[commitlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}]; ok {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		respond(resp)
	})
}

// checkCommit is Kafka's check of who may commit: anyone while the group
// is Empty (generation -1); otherwise a member of the current generation,
// and not while the group waits for its leader's assignment (the
// partitions are about to move). A commit during PreparingRebalance is
// allowed: an eager consumer commits before it gives its partitions up.
func (c *Coordinator) checkCommit(g *Group, req *kmsg.OffsetCommitRequest, simple bool) int16 {
	switch {
	case g.is(Dead):
		return kerr.CoordinatorNotAvailable.Code
	case simple:
		if !g.is(Empty) {
			return kerr.UnknownMemberID.Code
		}
		return 0
	case g.is(Empty):
		return kerr.UnknownMemberID.Code
	}
	if code := g.checkMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	if g.is(CompletingRebalance) {
		return kerr.RebalanceInProgress.Code
	}
	m := g.members[req.MemberID]
	c.scheduleHeartbeat(g, m, m.session) // a commit proves the member alive
	return 0
}

// OffsetFetch handles an OffsetFetch request: v0-v7 for one group, v8+
// for a batch. Topics nil (v2+) asks for every offset of the group; a
// partition with no commit answers offset -1.
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []kmsg.OffsetFetchRequestTopic
			if rg.Topics != nil {
				topics = []kmsg.OffsetFetchRequestTopic{}
				for _, t := range rg.Topics {
					topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			out := kmsg.NewOffsetFetchResponseGroup()
			out.Group = rg.Group
			found, code := c.fetchOffsets(rg.Group, topics, req.RequireStable)
			out.ErrorCode = code
			for _, t := range found {
				ot := kmsg.NewOffsetFetchResponseGroupTopic()
				ot.Topic = t.Topic
				for _, p := range t.Partitions {
					ot.Partitions = append(ot.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.Partition,
						Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode})
				}
				out.Topics = append(out.Topics, ot)
			}
			resp.Groups = append(resp.Groups, out)
		}
		return resp
	}
	found, code := c.fetchOffsets(req.Group, req.Topics, req.Version >= 7 && req.RequireStable)
	resp.Topics, resp.ErrorCode = found, code
	if code != 0 && req.Version < 2 { // v0-v1 carry errors per partition only
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, ErrorCode: code})
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}

// fetchOffsets reads a group's committed offsets for topics (nil: all).
// requireStable (v7+, KIP-447): a partition whose offset a transaction
// not yet decided has committed answers UNSTABLE_OFFSET_COMMIT, which the
// client retries, instead of the offset before it.
func (c *Coordinator) fetchOffsets(groupID string, topics []kmsg.OffsetFetchRequestTopic, requireStable bool) ([]kmsg.OffsetFetchResponseTopic, int16) {
	g, code := c.lookup(groupID, false)
	if code != 0 {
		return nil, code
	}
	offsets := map[commitlog.TopicPartition]Offset{}
	if g != nil {
		offsets = g.offsets
		defer g.unlock()
	}
	if topics == nil {
		byTopic := map[string][]int32{}
		for tp := range offsets {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		for t, ps := range byTopic {
			slices.Sort(ps)
			topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t, Partitions: ps})
		}
		slices.SortFunc(topics, func(a, b kmsg.OffsetFetchRequestTopic) int {
			return commitlog.TopicPartition{Topic: a.Topic}.Compare(commitlog.TopicPartition{Topic: b.Topic})
		})
	}
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			empty := ""
			rp.Metadata = &empty
			tp := commitlog.TopicPartition{Topic: t.Topic, Partition: p}
			if o, ok := offsets[tp]; ok {
				meta := o.Metadata
				rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Offset, o.LeaderEpoch, &meta
			}
			if requireStable && g != nil && g.unstable(tp) {
				rp.Offset, rp.LeaderEpoch, rp.ErrorCode = -1, -1, kerr.UnstableOffsetCommit.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, 0
}

// DescribeGroups handles a DescribeGroups request. A group this
// coordinator does not know is described as Dead, as Kafka does; members'
// metadata and assignments are shown only while the group is Stable.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	for _, id := range req.Groups {
		out := kmsg.NewDescribeGroupsResponseGroup()
		out.Group, out.State, out.AuthorizedOperations = id, Dead.String(), -2147483648
		g, code := c.lookup(id, false)
		out.ErrorCode = code
		if g != nil {
			out.State, out.ProtocolType = g.state.String(), g.protoType
			if g.is(Stable) {
				out.Protocol = g.protocol
			}
			for _, m := range g.sortedMembers() {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
				dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
				if g.is(Stable) {
					dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(g.protocol), m.assignment
				}
				out.Members = append(out.Members, dm)
			}
			g.unlock()
		}
		resp.Groups = append(resp.Groups, out)
	}
	return resp
}

// ListGroups handles a ListGroups request: the groups this broker
// coordinates, filtered by state (v4+). While a partition is still
// loading the answer is COORDINATOR_LOAD_IN_PROGRESS with no groups, as in
// Kafka.
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	groups, loading := c.snapshot()
	if loading { // as Kafka: no list while any partition is loading
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	}
	for _, g := range groups {
		g.lock()
		state, protoType := g.state.String(), g.protoType
		g.unlock()
		if state == Dead.String() || len(req.StatesFilter) > 0 && !slices.Contains(req.StatesFilter, state) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState = g.id, protoType, state
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// DeleteGroups handles a DeleteGroups request: an Empty group's metadata
// and offsets are deleted with tombstones, and the group with them once
// the ISR has the tombstones; a group with members answers
// NON_EMPTY_GROUP. respond is called once, possibly from another
// goroutine.
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest, respond func(*kmsg.DeleteGroupsResponse)) {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	left := len(req.Groups)
	done := make(chan struct{}, len(req.Groups))
	for i, id := range req.Groups {
		resp.Groups[i] = kmsg.NewDeleteGroupsResponseGroup()
		resp.Groups[i].Group = id
		c.deleteGroup(id, func(code int16) {
			resp.Groups[i].ErrorCode = code
			done <- struct{}{}
		})
	}
	if left == 0 {
		respond(resp)
		return
	}
	go func() {
		for range left {
			<-done
		}
		respond(resp)
	}()
}

func (c *Coordinator) deleteGroup(id string, done func(code int16)) {
	g, code := c.lookup(id, false)
	switch {
	case code != 0:
		done(code)
		return
	case g == nil:
		done(kerr.GroupIDNotFound.Code)
		return
	}
	defer g.unlock()
	switch g.state {
	case Dead:
		done(kerr.GroupIDNotFound.Code)
		return
	case PreparingRebalance, CompletingRebalance, Stable:
		done(kerr.NonEmptyGroup.Code)
		return
	}
	keys, values := [][]byte{groupKey(g.id)}, [][]byte{nil}
	for tp := range g.offsets {
		keys, values = append(keys, offsetKey(g.id, tp)), append(values, nil)
	}
	// The group goes only once the tombstones are in the ISR: a failed
	// write answers its error and leaves the group as it was, so that a
	// retry can delete it (Kafka removes it from its cache first and
	// writes the tombstones with acks=0, answering NONE either way).
	c.store(g, keys, values, func(code int16) {
		if code == 0 {
			g.lock()
			if g.is(Empty) {
				g.transition(Dead, c.now())
				g.offsets = map[commitlog.TopicPartition]Offset{}
				c.forget(g)
			}
			g.unlock()
		}
		done(code)
	})
}

// OffsetDelete handles an OffsetDelete request (KIP-496): a group's
// committed offsets for partitions of topics its members no longer
// subscribe to are deleted with tombstones; those still subscribed
// answer GROUP_SUBSCRIBED_TO_TOPIC. respond is called once, possibly from
// another goroutine.
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest, respond func(*kmsg.OffsetDeleteResponse)) {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	g, code := c.lookup(req.Group, false)
	switch {
	case code != 0:
		resp.ErrorCode = code
		respond(resp)
		return
	case g == nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		respond(resp)
		return
	}
	defer g.unlock()
	if g.is(Dead) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		reply(g, respond, resp)
		return
	}
	subscribed := map[string]bool{}
	if !g.is(Empty) {
		topics, ok := g.subscribedTopics()
		if !ok {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			reply(g, respond, resp)
			return
		}
		subscribed = topics
	}
	var keys, values [][]byte
	var deleted []commitlog.TopicPartition
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			tp := commitlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			switch _, ok := g.offsets[tp]; {
			case subscribed[t.Topic]:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case ok:
				keys, values = append(keys, offsetKey(g.id, tp)), append(values, nil)
				deleted = append(deleted, tp)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(keys) == 0 {
		reply(g, respond, resp)
		return
	}
	c.store(g, keys, values, func(code int16) {
		if code == 0 {
			g.lock()
			for _, tp := range deleted {
				delete(g.offsets, tp)
			}
			g.unlock()
		} else {
			resp.ErrorCode = code
		}
		respond(resp)
	})
}

// end build
