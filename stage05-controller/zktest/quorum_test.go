package zktest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// recoveryTimeout bounds the wait for an ensemble to elect a leader and take
// writes again after a fault: the fault must be noticed (syncLimit ticks,
// 2 s), a leader elected and the followers synced.
const recoveryTimeout = 30 * time.Second

// fault is one way to take a server out of the ensemble and bring it back.
type fault struct {
	name string
	down func(*zktest.Ensemble, int)
	up   func(*zktest.Ensemble, int)
}

// faults are the ways a ZooKeeper server fails that Kafka's controller has
// to live with.
var faults = []fault{
	{"kill", (*zktest.Ensemble).Kill, (*zktest.Ensemble).Start},
	{"stop", (*zktest.Ensemble).Stop, (*zktest.Ensemble).Start},
	{"pause", (*zktest.Ensemble).Pause, (*zktest.Ensemble).Unpause},
	{"disconnect", (*zktest.Ensemble).Disconnect, (*zktest.Ensemble).Connect},
}

// TestEnsembleWritesNeedAMajority takes the servers of a three-node ensemble
// down one at a time, in each of the ways a server fails: a write needs a
// majority of the ensemble (two of three), so writes go on with one server
// down, stop with two down, and resume when one returns. This is why a
// Kafka cluster runs three (or five) ZooKeeper servers and not two.
func TestEnsembleWritesNeedAMajority(t *testing.T) {
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ens := zktest.StartEnsemble(t, 3)
			all := zktest.Connect(t, ens.Addrs())
			createEventually(t, all, "/written-by-three")

			// The leader goes first, so that going on takes an election.
			first := ens.Leader()
			since := time.Now()
			f.down(ens, first)
			second := ens.Leader()
			require.NotEqual(t, first, second, "a server that is down cannot lead")
			// A client that knows every server moves to a live one, with
			// its session.
			createEventually(t, all, "/written-by-two")
			t.Logf("with the leader down: a new leader and a write after %v", time.Since(since).Round(time.Millisecond))

			survivor := 3 - first - second
			since = time.Now()
			f.down(ens, second)
			zktest.WaitFor(t, recoveryTimeout, "the survivor to stop serving", func() bool {
				return !ens.Serving(survivor)
			})
			t.Logf("with two down: the survivor stopped serving after %v", time.Since(since).Round(time.Millisecond))
			requireWriteFails(t, ens.Addr(survivor), "/written-by-one")

			since = time.Now()
			f.up(ens, second)
			majority := zktest.NewClient(t, []string{ens.Addr(second), ens.Addr(survivor)})
			createEventually(t, majority, "/written-after-return")
			t.Logf("with one back: writes resumed after %v", time.Since(since).Round(time.Millisecond))

			// With every server back, the one that was gone longest has
			// caught up: it has every write made without it, and not the
			// one that failed.
			f.up(ens, first)
			ens.WaitServing()
			// A thawed server answers srvr at once with the role it had
			// when it froze, and learns otherwise only within syncLimit
			// ticks. Until then no client gets a session from it: opening
			// a session is a write, and needs a quorum.
			late := zktest.Connect(t, []string{ens.Addr(first)})
			// A follower answers reads from its own copy, which may lag;
			// sync makes it catch up with the leader first.
			_, err := late.Sync("/")
			require.NoError(t, err)
			for _, path := range []string{"/written-by-three", "/written-by-two", "/written-after-return"} {
				exists, _, err := late.Exists(path)
				require.NoError(t, err)
				require.True(t, exists, "%s on the server that returned last", path)
			}
			exists, _, err := late.Exists("/written-by-one")
			require.NoError(t, err)
			require.False(t, exists, "a write without a majority was applied")
		})
	}
}

// createEventually creates a persistent znode at path, retrying until it
// succeeds: a write that meets a leader election fails and is tried again.
func createEventually(t *testing.T, c *zktest.Client, path string) {
	t.Helper()
	var lastErr error
	ok := zktest.Eventually(t, recoveryTimeout, func() bool {
		_, err := c.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
		// A write whose connection was lost may have been applied all the
		// same; the retry then finds the znode. A lost connection means
		// "unknown", not "failed": Kafka's ZooKeeper client re-checks in
		// the same way before it retries.
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			return true
		}
		lastErr = err
		return false
	})
	if !ok {
		t.Fatalf("create %s: no success within %v; last error: %v", path, recoveryTimeout, lastErr)
	}
}

// requireWriteFails checks that a write through the server at addr fails.
// The server has lost its quorum: it refuses sessions, so the request never
// leaves the client, and the caller can check later that it was not applied.
func requireWriteFails(t *testing.T, addr, path string) {
	t.Helper()
	c := zktest.NewClient(t, []string{addr})
	defer c.Close()
	_, err := c.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
	require.Error(t, err, "a write through a server without a quorum succeeded")
	t.Logf("write through %s without a quorum: %v", addr, err)
}
