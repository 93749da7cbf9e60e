package group_test

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// The harness: one partition of __consumer_offsets (offsets.topic.num.partitions
// is 1 here, so every group lives in partition 0), a real stage 01 log in
// t.TempDir(), and a fake Writer that appends to it as the broker's
// acks=all produce path would, so that a second Coordinator can be Elected
// on the same log and load what the first one wrote.

const (
	testGroup = "g"
	waitFor   = 5 * time.Second        // how long a test waits for an answer that must come
	tick      = 5 * time.Millisecond   // how often it polls
	longTime  = 30 * time.Second       // a session or rebalance timeout that never fires in a test
	shortTime = 300 * time.Millisecond // one that does
)

// fakeWriter is the broker's produce path for __consumer_offsets: it
// appends each batch to the log and calls done(0), unless told to fail
// (failWith) or to hold the callbacks until the test releases them.
type fakeWriter struct {
	t   *testing.T
	log *commitlog.Log

	mu      sync.Mutex
	fail    int16    // Protected by mu. Non-zero: answer this produce error without appending.
	hold    bool     // Protected by mu. Keep the callbacks of successful appends in held.
	held    []func() // Protected by mu.
	appends int      // Protected by mu. Batches appended to the log.
}

func (w *fakeWriter) Append(partition int32, batch []byte, timeout time.Duration, done func(code int16)) {
	if partition != 0 {
		w.t.Errorf("append to partition %d of __consumer_offsets; the harness has only partition 0", partition)
	}
	w.mu.Lock()
	fail := w.fail
	w.mu.Unlock()
	if fail != 0 {
		done(fail)
		return
	}
	if _, _, err := w.log.Append(batch); err != nil {
		w.t.Errorf("appending to __consumer_offsets: %v", err)
		done(kerr.KafkaStorageError.Code)
		return
	}
	w.mu.Lock()
	w.appends++
	if w.hold {
		w.held = append(w.held, func() { done(0) })
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	done(0)
}

// failWith makes the following appends fail with a produce error code (0: succeed again).
func (w *fakeWriter) failWith(code int16) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fail = code
}

// holdAcks keeps the callbacks of the following appends: the records are in
// the log, but the ISR has not acknowledged them yet.
func (w *fakeWriter) holdAcks() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold = true
}

// heldAcks is how many acknowledgements wait.
func (w *fakeWriter) heldAcks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

// releaseAcks stops holding and answers every held append.
func (w *fakeWriter) releaseAcks() {
	w.mu.Lock()
	held := w.held
	w.held, w.hold = nil, false
	w.mu.Unlock()
	for _, ack := range held {
		ack()
	}
}

type harness struct {
	t   *testing.T
	cfg group.Config
	log *commitlog.Log
	w   *fakeWriter
}

// newHarness opens the log; tweak adjusts Kafka's defaults, already lowered
// for tests (group.min.session.timeout.ms 10 ms,
// group.initial.rebalance.delay.ms 0).
func newHarness(t *testing.T, tweak func(*group.Config)) *harness {
	t.Helper()
	cfg := group.DefaultConfig()
	cfg.Partitions = 1
	cfg.MinSessionTimeout = 10 * time.Millisecond
	cfg.InitialRebalanceDelay = 0
	cfg.CommitTimeout = time.Second
	if tweak != nil {
		tweak(&cfg)
	}
	l, err := commitlog.Open(t.TempDir(), commitlog.DefaultConfig(), commitlog.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &harness{t: t, cfg: cfg, log: l, w: &fakeWriter{t: t, log: l}}
}

// coordinator starts a Coordinator elected leader of partition 0 in epoch
// epoch and waits until it has loaded the partition.
func (h *harness) coordinator(epoch int32) *group.Coordinator {
	h.t.Helper()
	c := h.coordinatorWith(group.Options{})
	c.Elected(0, epoch, h.log)
	h.waitLoaded(c)
	return c
}

// coordinatorWith starts a Coordinator that owns nothing yet.
func (h *harness) coordinatorWith(opts group.Options) *group.Coordinator {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := group.New(h.cfg, h.w, opts)
	h.t.Cleanup(c.Close)
	return c
}

func (h *harness) waitLoaded(c *group.Coordinator) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return c.Owns(testGroup) == 0 }, waitFor, tick, "the coordinator never finished loading")
}

// member is what a test knows of one consumer: its ids and generation.
type member struct {
	id       string
	instance *string // group.instance.id, nil for a dynamic member
	gen      int32
	session  time.Duration
	rebal    time.Duration
	topics   []string // its subscription (ConsumerMemberMetadata)
	metadata []byte   // its protocol metadata instead of the subscription, if not nil
}

func newMember() *member {
	return &member{session: longTime, rebal: longTime, topics: []string{"t1"}}
}

func (m *member) static(instance string) *member { m.instance = &instance; return m }

func (m *member) timeouts(session, rebalance time.Duration) *member {
	m.session, m.rebal = session, rebalance
	return m
}

// subscription is the member's "range" protocol metadata, as a Java
// consumer encodes it.
func subscription(topics ...string) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	return meta.AppendTo(nil)
}

func joinRequest(groupID string, m *member) group.JoinRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 7
	req.Group, req.MemberID, req.InstanceID = groupID, m.id, m.instance
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(m.session.Milliseconds()), int32(m.rebal.Milliseconds())
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", subscription(m.topics...)
	if m.metadata != nil {
		p.Metadata = m.metadata
	}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return group.JoinRequest{JoinGroupRequest: req, ClientID: "client", ClientHost: "/127.0.0.1"}
}

// joinAsync sends m's JoinGroup; the answer arrives on the channel.
func joinAsync(c *group.Coordinator, groupID string, m *member) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	c.JoinGroup(joinRequest(groupID, m), func(resp *kmsg.JoinGroupResponse) { ch <- resp })
	return ch
}

// await waits for an answer that must come.
func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		var zero T
		t.Fatalf("no answer within %v", waitFor)
		return zero
	}
}

// noAnswerYet checks that the request on ch is still parked.
func noAnswerYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s: answered while it should wait: %+v", what, v)
	default:
	}
}

// join sends m's JoinGroup, waits for the answer and records m's member id
// and generation from it.
func join(t *testing.T, c *group.Coordinator, groupID string, m *member) *kmsg.JoinGroupResponse {
	t.Helper()
	resp := await(t, joinAsync(c, groupID, m))
	adopt(m, resp)
	return resp
}

func adopt(m *member, resp *kmsg.JoinGroupResponse) {
	if resp.ErrorCode == 0 || resp.ErrorCode == kerr.MemberIDRequired.Code {
		m.id = resp.MemberID
	}
	if resp.ErrorCode == 0 {
		m.gen = resp.Generation
	}
}

// getID is KIP-394's first JoinGroup: no member id, MEMBER_ID_REQUIRED and one.
func getID(t *testing.T, c *group.Coordinator, groupID string, m *member) {
	t.Helper()
	resp := join(t, c, groupID, m)
	require.Equal(t, kerr.MemberIDRequired.Code, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
	require.NotEmpty(t, resp.MemberID)
}

func syncAsync(c *group.Coordinator, groupID string, m *member, assignments map[string][]byte) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.Generation, req.MemberID, req.InstanceID = groupID, m.gen, m.id, m.instance
	for id, a := range assignments {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	c.SyncGroup(req, func(resp *kmsg.SyncGroupResponse) { ch <- resp })
	return ch
}

func heartbeat(c *group.Coordinator, groupID string, m *member) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.Generation, req.MemberID, req.InstanceID = groupID, m.gen, m.id, m.instance
	return c.Heartbeat(req)
}

// assignmentOf is what the leader assigns a member in these tests.
func assignmentOf(id string) []byte { return []byte("assignment of " + id) }

// assignAll is the leader's SyncGroup assignments for these members.
func assignAll(ms ...*member) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range ms {
		out[m.id] = assignmentOf(m.id)
	}
	return out
}

// stableGroup builds a Stable group of these members, in this join order,
// the first being the leader: each gets its id (MEMBER_ID_REQUIRED); the
// first joins alone (generation 1); the others join and the first rejoins
// (generation 2, or 1 for a single member); the leader assigns each
// member assignmentOf(its id), and every member syncs.
func stableGroup(t *testing.T, c *group.Coordinator, groupID string, ms ...*member) {
	t.Helper()
	for _, m := range ms {
		if m.instance == nil {
			getID(t, c, groupID, m)
		}
	}
	first := join(t, c, groupID, ms[0])
	require.Zero(t, first.ErrorCode, kerr.ErrorForCode(first.ErrorCode))
	if len(ms) > 1 {
		var answers []<-chan *kmsg.JoinGroupResponse
		for _, m := range ms[1:] {
			answers = append(answers, joinAsync(c, groupID, m))
		}
		answers = append([]<-chan *kmsg.JoinGroupResponse{joinAsync(c, groupID, ms[0])}, answers...)
		for i, ch := range answers {
			resp := await(t, ch)
			require.Zero(t, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
			adopt(ms[i], resp)
		}
	}
	syncs := []<-chan *kmsg.SyncGroupResponse{syncAsync(c, groupID, ms[0], assignAll(ms...))}
	for _, m := range ms[1:] {
		syncs = append(syncs, syncAsync(c, groupID, m, nil))
	}
	for i, ch := range syncs {
		resp := await(t, ch)
		require.Zero(t, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
		require.Equal(t, assignmentOf(ms[i].id), resp.MemberAssignment)
	}
	require.Equal(t, "Stable", describe(t, c, groupID).State)
}

func describe(t *testing.T, c *group.Coordinator, groupID string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{groupID}
	resp := c.DescribeGroups(req)
	require.Len(t, resp.Groups, 1)
	return resp.Groups[0]
}

func memberIDs(d kmsg.DescribeGroupsResponseGroup) []string {
	var ids []string
	for _, m := range d.Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

func leaderMemberIDs(resp *kmsg.JoinGroupResponse) []string {
	var ids []string
	for _, m := range resp.Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

// commit is an OffsetCommit (v8) of offset o for each of tps ("topic", partition).
func commitAsync(c *group.Coordinator, groupID string, m *member, offsets map[string]map[int32]int64, metadata string) <-chan *kmsg.OffsetCommitResponse {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation, req.MemberID, req.InstanceID = groupID, -1, "", nil
	if m != nil {
		req.Generation, req.MemberID, req.InstanceID = m.gen, m.id, m.instance
	}
	for topic, ps := range offsets {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, o := range ps {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, 7
			meta := metadata
			rp.Metadata = &meta
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	ch := make(chan *kmsg.OffsetCommitResponse, 1)
	c.OffsetCommit(req, func(resp *kmsg.OffsetCommitResponse) { ch <- resp })
	return ch
}

// commit commits and returns the error code of each partition.
func commit(t *testing.T, c *group.Coordinator, groupID string, m *member, offsets map[string]map[int32]int64, metadata string) map[string]map[int32]int16 {
	t.Helper()
	return commitCodes(await(t, commitAsync(c, groupID, m, offsets, metadata)))
}

func commitCodes(resp *kmsg.OffsetCommitResponse) map[string]map[int32]int16 {
	out := map[string]map[int32]int16{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = map[int32]int16{}
		for _, rp := range rt.Partitions {
			out[rt.Topic][rp.Partition] = rp.ErrorCode
		}
	}
	return out
}

// committed is an OffsetFetch (v7) of every offset of the group: topic ->
// partition -> offset.
func committed(t *testing.T, c *group.Coordinator, groupID string) map[string]map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group, req.Topics = groupID, nil
	resp := c.OffsetFetch(req)
	require.Zero(t, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
	out := map[string]map[int32]int64{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = map[int32]int64{}
		for _, rp := range rt.Partitions {
			require.Zero(t, rp.ErrorCode)
			out[rt.Topic][rp.Partition] = rp.Offset
		}
	}
	return out
}

func leaveRequest(groupID string, ms ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupRequest {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 4
	req.Group, req.Members = groupID, ms
	return req
}

func leaving(memberID string, instance *string) kmsg.LeaveGroupRequestMember {
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = memberID, instance
	return lm
}

func code(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}
