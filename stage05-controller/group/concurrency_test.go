package group_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// awaitErr is await for goroutines other than the test's: a request that
// is never answered is an error, not a t.Fatal.
func awaitErr[T any](ch <-chan T, what string) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-time.After(waitFor):
		var zero T
		return zero, fmt.Errorf("%s: no answer within %v", what, waitFor)
	}
}

type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) count(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

// churn is one consumer going through rounds of join, sync, heartbeats,
// a commit, and now and then a LeaveGroup (or, for a static member, a
// restart with no member id); every request must be answered. A member
// that crashes leaves nothing behind but its session.
func churn(c *group.Coordinator, m *member, rounds int, crash bool, stats *counts) error {
	for r := range rounds {
		if m.id == "" && m.instance == nil {
			resp, err := awaitErr(joinAsync(c, testGroup, m), "first JoinGroup")
			if err != nil {
				return err
			}
			if resp.ErrorCode != kerr.MemberIDRequired.Code {
				return fmt.Errorf("first JoinGroup: %s", code(resp.ErrorCode))
			}
			m.id = resp.MemberID
		}
		resp, err := awaitErr(joinAsync(c, testGroup, m), "JoinGroup")
		if err != nil {
			return err
		}
		stats.count("join " + code(resp.ErrorCode))
		switch resp.ErrorCode {
		case 0:
		case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
			m.id = ""
			continue
		case kerr.RebalanceInProgress.Code:
			continue
		default:
			return fmt.Errorf("JoinGroup: %s", code(resp.ErrorCode))
		}
		adopt(m, resp)
		var assignments map[string][]byte
		if resp.LeaderID == m.id {
			assignments = map[string][]byte{}
			for _, jm := range resp.Members {
				assignments[jm.MemberID] = assignmentOf(jm.MemberID)
			}
		}
		sresp, err := awaitErr(syncAsync(c, testGroup, m, assignments), "SyncGroup")
		if err != nil {
			return err
		}
		stats.count("sync " + code(sresp.ErrorCode))
		for range 3 {
			if heartbeat(c, testGroup, m) != 0 {
				break
			}
		}
		if _, err := awaitErr(commitAsync(c, testGroup, m, offsets{"t1": {int32(r % 4): int64(r)}}, ""), "OffsetCommit"); err != nil {
			return err
		}
		if r%3 == 2 {
			if m.instance != nil {
				m.id = "" // a restart: the static member rejoins without its id
				continue
			}
			c.LeaveGroup(leaveRequest(testGroup, leaving(m.id, nil)))
			m.id = ""
		}
	}
	if crash {
		return nil // it just stops: its session expires
	}
	if m.id != "" || m.instance != nil {
		c.LeaveGroup(leaveRequest(testGroup, leaving(m.id, m.instance)))
	}
	return nil
}

// Many members joining, syncing, heartbeating, committing, leaving,
// restarting and crashing at once, with admin requests alongside: under -race, nothing
// deadlocks, every request is answered, and once all have left the group
// is Empty (the crashed ones after their session timeout).
func TestConcurrentMembersNeitherDeadlockNorLoseAnswers(t *testing.T) {
	h := newHarness(t, func(cfg *group.Config) { cfg.InitialRebalanceDelay = 20 * time.Millisecond })
	c := h.coordinator(1)

	const members, rounds = 24, 20
	var stats counts
	errs := make(chan error, members+1)
	var wg sync.WaitGroup
	for i := range members {
		m := newMember().timeouts(time.Second, 200*time.Millisecond)
		if i%4 == 0 {
			m.static(fmt.Sprintf("instance-%d", i))
		}
		wg.Go(func() { errs <- churn(c, m, rounds, i%5 == 1, &stats) })
	}
	stop := make(chan struct{})
	var admin sync.WaitGroup
	admin.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			describe(t, c, testGroup)
			c.ListGroups(kmsg.NewPtrListGroupsRequest())
			fetch := kmsg.NewPtrOffsetFetchRequest()
			fetch.Version, fetch.Group = 7, testGroup
			c.OffsetFetch(fetch)
			time.Sleep(time.Millisecond) // pacing only: nothing waits on it
		}
	})

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("members still busy after 60 s: a deadlock?")
	}
	close(stop)
	admin.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	require.NoError(t, errors.Join(all...))
	t.Logf("answers: %v", stats.n)
	require.Positive(t, stats.n["sync NONE"], "some generations completed")

	require.Eventually(t, func() bool {
		d := describe(t, c, testGroup)
		return d.State == "Empty" && len(d.Members) == 0
	}, waitFor, tick)
}
