package controller_test

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

func testLogger() *slog.Logger {
	if os.Getenv("WORKBOOK_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// candidate is one broker's session and controller.
type candidate struct {
	id    int32
	zk    *kafkazk.Client
	ctl   *controller.Controller
	proxy *zktest.Proxy // its path to ZooKeeper, to cut

	mu       sync.Mutex
	elected  []time.Time // when it became the controller. Protected by mu.
	resigned []time.Time // when it stopped. Protected by mu.
}

// startCandidates starts n brokers' controllers, each on its own session
// through its own proxy to the server.
func startCandidates(t *testing.T, ens *zktest.Ensemble, n int) []*candidate {
	t.Helper()
	return startCandidatesWith(t, ens, n, nil)
}

// startCandidatesWith is startCandidates with options set by opts (nil:
// none).
func startCandidatesWith(t *testing.T, ens *zktest.Ensemble, n int, opts func(*controller.Options)) []*candidate {
	t.Helper()
	out := make([]*candidate, n)
	for i := range out {
		cd := &candidate{id: int32(i), proxy: zktest.StartProxy(t, ens.Addr(0))}
		var err error
		cd.zk, err = kafkazk.Connect(cd.proxy.Addr(), kafkazk.Options{SessionTimeout: zktest.SessionTimeout, Logger: testLogger()})
		require.NoError(t, err)
		require.NoError(t, cd.zk.CreateTopLevelPaths())
		o := controller.Options{Logger: testLogger(),
			OnElected: func(kafkazk.ControllerEpoch) {
				cd.mu.Lock()
				cd.elected = append(cd.elected, time.Now())
				cd.mu.Unlock()
			},
			OnResigned: func() {
				cd.mu.Lock()
				cd.resigned = append(cd.resigned, time.Now())
				cd.mu.Unlock()
			}}
		if opts != nil {
			opts(&o)
		}
		cd.ctl = controller.New(cd.zk, cd.id, o)
		cd.ctl.Start()
		t.Cleanup(cd.stop)
		out[i] = cd
	}
	return out
}

// electedTimes and resignedTimes are copies of what the callbacks saw.
func (cd *candidate) electedTimes() []time.Time {
	cd.mu.Lock()
	defer cd.mu.Unlock()
	return append([]time.Time(nil), cd.elected...)
}

func (cd *candidate) resignedTimes() []time.Time {
	cd.mu.Lock()
	defer cd.mu.Unlock()
	return append([]time.Time(nil), cd.resigned...)
}

// stop closes the controller and then the session, as a broker's clean
// shutdown does. Stopping twice is harmless. Test goroutine only.
func (cd *candidate) stop() {
	if cd.ctl == nil {
		return
	}
	cd.ctl.Close()
	cd.zk.Close()
	cd.ctl = nil
}

// active waits until exactly one of the running candidates is the
// controller and every running one agrees, and returns it.
func active(t *testing.T, cds []*candidate) *candidate {
	t.Helper()
	var winner *candidate
	require.Eventually(t, func() bool {
		winner = nil
		for _, cd := range cds {
			if cd.ctl == nil {
				continue
			}
			if cd.ctl.IsActive() {
				if winner != nil {
					t.Fatalf("brokers %d and %d are both the controller", winner.id, cd.id)
				}
				winner = cd
			}
		}
		if winner == nil {
			return false
		}
		for _, cd := range cds {
			if cd.ctl == nil {
				continue
			}
			if id, ok, err := cd.zk.ControllerID(); err != nil || !ok || id != winner.id {
				return false
			}
		}
		return true
	}, 30*time.Second, 5*time.Millisecond, "one controller that every broker names")
	return winner
}

// TestOneControllerAtATimeAndTheEpochOnlyGrows: seed §1.1's election on a
// real ZooKeeper. Three brokers run; one is the controller and all name
// it. Stopping it cleanly hands the office over at once (its session is
// closed, /controller goes, the watches fire: no session timeout to wait),
// and each new controller's epoch is higher than the last.
func TestOneControllerAtATimeAndTheEpochOnlyGrows(t *testing.T) {
	ens := zktest.StartStandalone(t)
	cds := startCandidates(t, ens, 3)
	first := active(t, cds)
	e1, _ := first.ctl.Epoch()
	require.Equal(t, int32(1), e1.Epoch)

	stopped := time.Now()
	first.stop()
	second := active(t, cds)
	handover := time.Since(stopped)
	t.Logf("clean stop: broker %d took over after %v (session timeout %v)", second.id, handover.Round(time.Millisecond), zktest.SessionTimeout)
	require.Less(t, handover, zktest.SessionTimeout/2, "no session timeout to wait for")
	e2, _ := second.ctl.Epoch()
	require.Greater(t, e2.Epoch, e1.Epoch)

	second.stop()
	third := active(t, cds)
	e3, _ := third.ctl.Epoch()
	require.Greater(t, e3.Epoch, e2.Epoch)
}

// TestACutOffControllerResignsBeforeItsSuccessorIsElectedAndIsFenced: the
// controller's path to ZooKeeper is cut past its session timeout. It stops
// acting on its own before the ensemble expires its session, so there are
// never two; another broker is elected at a higher epoch; and when the old
// one reconnects, a write made with its old epoch is refused by the epoch
// check and changes nothing (KAFKA-6082), while it stands by under the
// new controller.
func TestACutOffControllerResignsBeforeItsSuccessorIsElectedAndIsFenced(t *testing.T) {
	ens := zktest.StartStandalone(t)
	cds := startCandidates(t, ens, 3)
	old := active(t, cds)
	oldEpoch, _ := old.ctl.Epoch()
	tp := commitlog.TopicPartition{Topic: "fenced", Partition: 0}
	require.NoError(t, old.zk.CreateTopic(tp.Topic, kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {0, 1, 2}, 1: {0, 1, 2}}}, nil))
	require.NoError(t, old.zk.CreatePartitionStates(oldEpoch, map[commitlog.TopicPartition]isr.PartitionState{
		tp: {Leader: 0, ControllerEpoch: oldEpoch.Epoch, ISR: []int32{0, 1, 2}}}))

	cut := time.Now()
	old.proxy.Cut()
	stoppedActing := make(chan time.Time, 1)
	go func() { // when the old controller stops acting, to the millisecond
		for old.ctl.IsActive() {
			time.Sleep(time.Millisecond)
		}
		stoppedActing <- time.Now()
	}()
	var successor *candidate
	require.Eventually(t, func() bool {
		for _, cd := range cds {
			if cd != old && cd.ctl.IsActive() && len(cd.electedTimes()) > 0 {
				successor = cd
				return true
			}
		}
		return false
	}, 30*time.Second, 5*time.Millisecond, "another broker becomes the controller")
	var resignedAfter time.Duration
	select {
	case at := <-stoppedActing:
		resignedAfter = at.Sub(cut)
	default:
		t.Fatal("the old controller is still acting while another was elected")
	}
	elected := successor.electedTimes()
	electedAfter := elected[len(elected)-1].Sub(cut)
	t.Logf("cut at 0: old controller stopped acting at %v, broker %d elected at %v (session timeout %v)",
		resignedAfter.Round(time.Millisecond), successor.id, electedAfter.Round(time.Millisecond), zktest.SessionTimeout)
	require.Less(t, resignedAfter, electedAfter, "never two controllers")
	require.Eventually(t, func() bool { return len(old.resignedTimes()) == 1 }, 30*time.Second, 10*time.Millisecond,
		"and resigned once its event goroutine was free")
	newEpoch, _ := successor.ctl.Epoch()
	require.Greater(t, newEpoch.Epoch, oldEpoch.Epoch)

	old.proxy.Restore()
	require.Eventually(t, old.zk.Connected, 30*time.Second, 10*time.Millisecond, "the old controller reconnects")
	require.Same(t, successor, active(t, cds), "and stands by")
	// The state as the new controller left it (its failover found no live
	// replica and took the partition offline), and a zombie write on it.
	before, v, err := old.zk.PartitionState(tp)
	require.NoError(t, err)
	s := before
	s.Leader = 1
	_, _, err = old.zk.UpdatePartitionStates(oldEpoch, map[commitlog.TopicPartition]kafkazk.VersionedState{tp: {PartitionState: s, ZkVersion: v}})
	require.ErrorIs(t, err, kafkazk.ErrControllerMoved, "a write with the old epoch is fenced")
	got, gotVersion, err := successor.zk.PartitionState(tp)
	require.NoError(t, err)
	require.Equal(t, before, got, "and changed nothing")
	require.Equal(t, v, gotVersion)
}

// TestNoWatchGoroutineOutlivesItsTerm: every ZooKeeper watch the
// controller arms has a goroutine waiting for it, and so has the
// preferred-leader timer. A resignation used to leave them all waiting
// (for a watch on a znode nobody changes, for ever; for the timer, until
// its next tick), and each new term armed its own: a controller that
// resigned and was elected again six times held six terms' goroutines.
// They end with the term now: the count after six terms is the count
// after one.
func TestNoWatchGoroutineOutlivesItsTerm(t *testing.T) {
	ens := zktest.StartStandalone(t)
	fakeBroker(t, ens, 0)
	ctl := startCandidatesWith(t, ens, 1, func(o *controller.Options) {
		o.AutoLeaderRebalance, o.LeaderImbalanceCheckInterval = true, time.Hour
	})[0]
	active(t, []*candidate{ctl})
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, ctl.zk.CreateTopic("t", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {0}}}, nil))
	require.Eventually(t, func() bool {
		s, _, err := ctl.zk.PartitionState(tp)
		return err == nil && s.Leader == 0
	}, 20*time.Second, 5*time.Millisecond, "the topic's partition online (its znode watched too)")

	// A new term: /controller deleted, as a resignation elsewhere would;
	// the controller resigns and, alone, is elected again.
	newTerm := func() {
		t.Helper()
		before, _ := ctl.ctl.Epoch()
		require.NoError(t, ctl.zk.ResignController())
		require.Eventually(t, func() bool {
			e, ok := ctl.ctl.Epoch()
			return ok && e.Epoch > before.Epoch
		}, 20*time.Second, 5*time.Millisecond, "elected again")
		// The epoch is set as the failover starts; an event queued now
		// runs after it, when the new term's watches are all armed.
		_, _, err := ctl.ctl.StateMachines()
		require.NoError(t, err)
	}
	newTerm()
	base := runtime.NumGoroutine()
	for range 5 {
		newTerm()
	}
	deadline := time.Now().Add(10 * time.Second)
	// A little slack: the Docker client's idle connection comes and goes.
	for n := runtime.NumGoroutine(); n > base+3; n = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after one term, %d after six: the earlier terms' are still there", base, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
