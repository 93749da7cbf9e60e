package group_test

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// A request's respond is the caller's code (the server's hands the answer
// to the network layer, which encodes it), so the coordinator calls it
// with no group's lock held: answers to parked requests always were
// (Group.later), but the requests answered at once (an error, a Stable
// member's JoinGroup or SyncGroup, a commit of nothing) were answered
// inside the group's lock. A respond that asks the coordinator about the
// group, as a client sending its next request from the answer would, hung
// there for ever, and so did every later request of the group.
func TestEveryAnswerIsGivenWithTheGroupUnlocked(t *testing.T) {
	stale := func(m *member) *member { s := *m; s.gen--; return &s }
	for _, tc := range []struct {
		what string
		want int16
		send func(c *group.Coordinator, m *member, respond func(code int16))
	}{
		{"JoinGroup of a Stable member with its protocols", 0, func(c *group.Coordinator, m *member, respond func(int16)) {
			c.JoinGroup(joinRequest(testGroup, m), func(r *kmsg.JoinGroupResponse) { respond(r.ErrorCode) })
		}},
		{"JoinGroup with another protocol type", kerr.InconsistentGroupProtocol.Code, func(c *group.Coordinator, m *member, respond func(int16)) {
			req := joinRequest(testGroup, m)
			req.ProtocolType = "connect"
			c.JoinGroup(req, func(r *kmsg.JoinGroupResponse) { respond(r.ErrorCode) })
		}},
		{"JoinGroup of a new member", kerr.MemberIDRequired.Code, func(c *group.Coordinator, _ *member, respond func(int16)) {
			c.JoinGroup(joinRequest(testGroup, newMember()), func(r *kmsg.JoinGroupResponse) { respond(r.ErrorCode) })
		}},
		{"SyncGroup of a Stable member", 0, func(c *group.Coordinator, m *member, respond func(int16)) {
			c.SyncGroup(syncRequest(m), func(r *kmsg.SyncGroupResponse) { respond(r.ErrorCode) })
		}},
		{"SyncGroup of an old generation", kerr.IllegalGeneration.Code, func(c *group.Coordinator, m *member, respond func(int16)) {
			c.SyncGroup(syncRequest(stale(m)), func(r *kmsg.SyncGroupResponse) { respond(r.ErrorCode) })
		}},
		{"OffsetCommit of an old generation", kerr.IllegalGeneration.Code, func(c *group.Coordinator, m *member, respond func(int16)) {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version = 8
			req.Group, req.Generation, req.MemberID = testGroup, m.gen-1, m.id
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "t1"
			rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 9}}
			req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
			c.OffsetCommit(req, func(r *kmsg.OffsetCommitResponse) { respond(r.Topics[0].Partitions[0].ErrorCode) })
		}},
		{"OffsetDelete of offsets never committed", 0, func(c *group.Coordinator, _ *member, respond func(int16)) {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = testGroup
			req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t2", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
			c.OffsetDelete(req, func(r *kmsg.OffsetDeleteResponse) { respond(r.ErrorCode) })
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			h := newHarness(t, nil)
			c := group.New(h.cfg, h.w, group.Options{Logger: slog.New(slog.DiscardHandler)})
			t.Cleanup(func() {
				if !t.Failed() { // a coordinator left locked would hang its Close
					c.Close()
				}
			})
			c.Elected(0, 1, h.log)
			h.waitLoaded(c)
			m1, m2 := newMember(), newMember()
			stableGroup(t, c, testGroup, m1, m2)

			// The request goes on its own goroutine; its respond looks the
			// group up (DescribeGroups takes the group's lock) before it
			// reports the answer's error code.
			codes := make(chan int16, 1)
			go tc.send(c, m2, func(code int16) {
				describeGroups(c)
				codes <- code
			})
			got, err := awaitErr(codes, tc.what)
			if err != nil {
				t.Fatalf("%v: answered with the group's lock held", err)
			}
			if got != tc.want {
				t.Errorf("answered %s, want %s", code(got), code(tc.want))
			}
		})
	}
}

func syncRequest(m *member) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.Generation, req.MemberID = testGroup, m.gen, m.id
	return req
}

// describeGroups is describe for any goroutine: no test assertions.
func describeGroups(c *group.Coordinator) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{testGroup}
	c.DescribeGroups(req)
}
