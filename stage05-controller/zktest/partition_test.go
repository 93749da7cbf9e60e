package zktest_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// A broker's registration, /brokers/ids/<id>, is an ephemeral znode: the
// controller learns that a broker died when it disappears (§1.1, §1.3).
// ZooKeeper cannot tell a dead broker from one it cannot hear, so a broker
// cut off from ZooKeeper for longer than its session timeout is dead to the
// cluster, though it is still running. These tests cut a broker's path to
// ZooKeeper with a Proxy, for longer and for shorter than that.

// TestCutOffClientLosesSessionAndEphemerals cuts a broker off from the
// ensemble for longer than its session timeout: the ensemble expires the
// session and deletes the broker's registration, and every other client,
// on any server, sees it go. The broker learns it only when it reaches
// ZooKeeper again.
func TestCutOffClientLosesSessionAndEphemerals(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	proxy := zktest.StartProxy(t, ens.Addr(0))
	broker := zktest.Connect(t, []string{proxy.Addr()})
	// The controller talks to another server: sessions belong to the
	// ensemble, not to the server a client happens to be connected to.
	controller := zktest.Connect(t, []string{ens.Addr(1)})

	registerBroker(t, broker, 1)
	// The registration went through server 0; server 1 may not have
	// applied it yet (a follower answers reads from its own copy), so
	// catch up with the leader before reading.
	_, err := controller.Sync(brokerIDsPath)
	require.NoError(t, err)
	ids, _, watch, err := controller.ChildrenW(brokerIDsPath)
	require.NoError(t, err)
	require.Equal(t, []string{"1"}, ids)

	cut := time.Now()
	proxy.Cut()
	select {
	case ev := <-watch:
		require.Equal(t, zk.EventNodeChildrenChanged, ev.Type, "event %+v", ev)
	case <-time.After(3 * zktest.SessionTimeout):
		t.Fatalf("broker 1's registration still there %v after the cut", 3*zktest.SessionTimeout)
	}
	t.Logf("broker 1's registration deleted %v after the cut (session timeout %v)",
		time.Since(cut).Round(10*time.Millisecond), zktest.SessionTimeout)
	ids, _, err = controller.Children(brokerIDsPath)
	require.NoError(t, err)
	require.Empty(t, ids)

	// Only the ensemble can say a session expired, and the broker cannot
	// hear it: as far as it knows, it is merely disconnected.
	require.False(t, broker.Saw(zk.StateExpired), "the broker learned of its expiry through a cut")
	proxy.Restore()
	zktest.WaitFor(t, 3*zktest.SessionTimeout, "the broker to learn its session expired", func() bool {
		return broker.Saw(zk.StateExpired)
	})
	// A new session brings nothing back: a broker must register again
	// (Kafka's does, in its session-expiry handler).
	zktest.WaitFor(t, 3*zktest.SessionTimeout, "a new session for the broker", broker.HasSession)
	exists, _, err := broker.Exists(brokerIDsPath + "/1")
	require.NoError(t, err)
	require.False(t, exists)
}

// TestSessionSurvivesCutShorterThanTimeout cuts a broker off until its
// client notices the silence, then restores the path: the client
// reconnects within the session timeout, and its session and registration
// live on. The client gives up on a silent connection after 2/3 of the
// session timeout so that 1/3 is left for this.
func TestSessionSurvivesCutShorterThanTimeout(t *testing.T) {
	zoo := zktest.StartStandalone(t)
	proxy := zktest.StartProxy(t, zoo.Addr(0))
	// go-zookeeper waits 1 s before it tries the only server it knows
	// again; a 6 s session leaves 2 s after the client notices, so that
	// second is not most of the margin.
	broker := zktest.Connect(t, []string{proxy.Addr()}, zktest.WithSessionTimeout(6*time.Second))
	registerBroker(t, broker, 1)
	session := broker.SessionID()

	proxy.Cut()
	zktest.WaitFor(t, 6*time.Second, "the broker to notice the silence", func() bool {
		return broker.Saw(zk.StateDisconnected)
	})
	proxy.Restore()
	zktest.WaitFor(t, 6*time.Second, "the broker to reconnect", broker.HasSession)

	require.Equal(t, session, broker.SessionID(), "the broker has a new session")
	require.False(t, broker.Saw(zk.StateExpired))
	exists, _, err := broker.Exists(brokerIDsPath + "/1")
	require.NoError(t, err)
	require.True(t, exists, "the registration outlived a short cut")
}
