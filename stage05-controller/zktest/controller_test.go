package zktest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// These tests preview the controller election of seed §1.1 on a real
// ZooKeeper: every broker tries to create the ephemeral /controller; the
// first one wins and is the controller, the others get NodeExists and watch
// the znode. It lives as long as the winner's session, so when that session
// ends, however it ends, the watches fire and the next election starts.
// Stage 05 builds the controller on exactly this.

// elect is one broker's attempt to become the controller, in the shape of
// KafkaController.elect: create the ephemeral /controller, or, if another
// broker holds it, watch it. (Kafka also bumps /controller_epoch in the
// same multi, to fence a zombie controller; that is stage 05's.)
func elect(c *zktest.Client, brokerID int) (won bool, watch <-chan zk.Event, err error) {
	for {
		_, err := c.Create(controllerPath, encodeController(brokerID), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			return true, nil, nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return false, nil, fmt.Errorf("broker %d: create %s: %w", brokerID, controllerPath, err)
		}
		exists, _, watch, err := c.ExistsW(controllerPath)
		if err != nil {
			return false, nil, fmt.Errorf("broker %d: watch %s: %w", brokerID, controllerPath, err)
		}
		if exists {
			return false, watch, nil
		}
		// The controller went away between our create and our exists:
		// run for it again.
	}
}

// candidate is a broker standing for controller.
type candidate struct {
	brokerID int             // Kafka's broker.id
	client   *zktest.Client  // the broker's ZooKeeper session
	won      bool            // it created /controller
	watch    <-chan zk.Event // its watch on /controller, when another broker won
}

// raceForController has the candidates run for controller at the same
// instant and checks the outcome: exactly one winner, named in /controller
// and owning it by its session; every other candidate got NodeExists and
// is watching. It returns the winner.
func raceForController(t *testing.T, candidates ...*candidate) *candidate {
	t.Helper()
	start := make(chan struct{})
	errs := make([]error, len(candidates))
	var wg sync.WaitGroup
	for i, c := range candidates {
		wg.Go(func() {
			<-start
			c.won, c.watch, errs[i] = elect(c.client, c.brokerID)
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	var winner *candidate
	for _, c := range candidates {
		if c.won {
			if winner != nil {
				t.Fatalf("brokers %d and %d both won", winner.brokerID, c.brokerID)
			}
			winner = c
		} else {
			require.NotNil(t, c.watch, "broker %d lost but does not watch %s", c.brokerID, controllerPath)
		}
	}
	require.NotNil(t, winner, "nobody won the election")
	requireController(t, candidates[0].client, winner)
	t.Logf("broker %d is the controller", winner.brokerID)
	return winner
}

// requireController checks, through client c, that /controller names want
// and is owned by its session.
func requireController(t *testing.T, c *zktest.Client, want *candidate) {
	t.Helper()
	data, stat, err := c.Get(controllerPath)
	require.NoError(t, err)
	var got controllerZNode
	require.NoError(t, json.Unmarshal(data, &got), "content %q", data)
	require.Equal(t, 1, got.Version)
	require.Equal(t, want.brokerID, got.BrokerID)
	require.Equal(t, want.client.SessionID(), stat.EphemeralOwner, "ephemeral owner is the winner's session")
}

// requireDeleted waits for a watch on /controller to report its deletion.
func requireDeleted(t *testing.T, watch <-chan zk.Event, timeout time.Duration) {
	t.Helper()
	select {
	case ev := <-watch:
		require.Equal(t, zk.EventNodeDeleted, ev.Type, "event %+v", ev)
		require.Equal(t, controllerPath, ev.Path)
	case <-time.After(timeout):
		t.Fatalf("no watch event for %s within %v", controllerPath, timeout)
	}
}

func TestControllerElectionHasExactlyOneWinner(t *testing.T) {
	zoo := zktest.StartStandalone(t)
	var candidates []*candidate
	for id := 1; id <= 3; id++ {
		candidates = append(candidates, &candidate{brokerID: id, client: zktest.Connect(t, zoo.Addrs())})
	}
	raceForController(t, candidates...)
}

func TestEphemeralControllerMovesWhenSessionCloses(t *testing.T) {
	zoo := zktest.StartStandalone(t)
	a := &candidate{brokerID: 1, client: zktest.Connect(t, zoo.Addrs())}
	b := &candidate{brokerID: 2, client: zktest.Connect(t, zoo.Addrs())}
	winner := raceForController(t, a, b)
	loser := b
	if winner == b {
		loser = a
	}

	// A controlled shutdown: closing the session deletes its ephemeral
	// znodes at once, so the others do not wait for a timeout.
	winner.client.Close()
	requireDeleted(t, loser.watch, zktest.SessionTimeout)

	won, _, err := elect(loser.client, loser.brokerID)
	require.NoError(t, err)
	require.True(t, won, "broker %d should take over", loser.brokerID)
	requireController(t, loser.client, loser)
}

func TestEphemeralControllerMovesWhenSessionExpires(t *testing.T) {
	zoo := zktest.StartStandalone(t)
	// Each broker reaches ZooKeeper through its own proxy, so whichever
	// wins can be cut off alone.
	proxies := map[int]*zktest.Proxy{
		1: zktest.StartProxy(t, zoo.Addr(0)),
		2: zktest.StartProxy(t, zoo.Addr(0)),
	}
	a := &candidate{brokerID: 1, client: zktest.Connect(t, []string{proxies[1].Addr()})}
	b := &candidate{brokerID: 2, client: zktest.Connect(t, []string{proxies[2].Addr()})}
	winner := raceForController(t, a, b)
	loser := b
	if winner == b {
		loser = a
	}
	oldSession := winner.client.SessionID()

	// The controller is partitioned from ZooKeeper. Nothing is closed:
	// ZooKeeper hears nothing from the session, and after the session
	// timeout ends it and deletes its ephemeral /controller.
	cut := time.Now()
	proxies[winner.brokerID].Cut()
	requireDeleted(t, loser.watch, 3*zktest.SessionTimeout)
	t.Logf("/controller deleted %v after the cut (session timeout %v)",
		time.Since(cut).Round(10*time.Millisecond), zktest.SessionTimeout)

	won, _, err := elect(loser.client, loser.brokerID)
	require.NoError(t, err)
	require.True(t, won, "broker %d should take over", loser.brokerID)
	requireController(t, loser.client, loser)

	// Until the partition heals, the old controller cannot even learn that
	// it was replaced: two brokers believe they are the controller. Kafka
	// fences the old one with the controller epoch (/controller_epoch),
	// which stage 05 adds.
	proxies[winner.brokerID].Restore()
	zktest.WaitFor(t, 3*zktest.SessionTimeout, "the old controller to see its session expired", func() bool {
		return winner.client.Saw(zk.StateExpired)
	})
	// go-zookeeper then opens a new session by itself, as Kafka's
	// ZooKeeperClient does; with it the old controller runs again and
	// loses to the new one.
	zktest.WaitFor(t, 3*zktest.SessionTimeout, "a new session for the old controller", winner.client.HasSession)
	require.NotEqual(t, oldSession, winner.client.SessionID())
	won, watch, err := elect(winner.client, winner.brokerID)
	require.NoError(t, err)
	require.False(t, won, "broker %d must not win back a live controller's place", winner.brokerID)
	require.NotNil(t, watch)
	requireController(t, winner.client, loser)
}
