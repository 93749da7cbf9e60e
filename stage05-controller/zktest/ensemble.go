package zktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

const (
	// startTimeout bounds starting the servers and waiting for them to
	// serve: a JVM start and a leader election, on a busy two-core machine.
	startTimeout = 60 * time.Second

	// opTimeout bounds one fault verb (a clean stop takes up to 10 s).
	opTimeout = 30 * time.Second

	// stopGrace is how long Stop lets ZooKeeper shut down before Docker
	// kills it.
	stopGrace = 10 * time.Second

	// logLines is how much of each server's log a failed test prints.
	logLines = 40
)

// Ensemble is a set of ZooKeeper servers, each in its own container, on a
// Docker network of their own. Servers are numbered from 0 (server i has
// ZooKeeper's myid i+1 and the hostname zk{i+1}). Clients on the host reach
// them at Addrs, on 127.0.0.1; containers on Network reach them at
// ConnectString.
//
// The verbs (Kill, Stop, Start, Pause, Unpause, Disconnect, Connect) fail
// the test if Docker refuses, and must be called from the test's goroutine.
// They return once Docker has acted, not when ZooKeeper has noticed: a test
// waits for what it expects to follow (WaitServing, Leader, WaitFor).
type Ensemble struct {
	t       testing.TB
	docker  *testcontainers.DockerClient // for the faults testcontainers has no verb for
	network *ensembleNetwork             // the servers' user-defined bridge network
	nodes   []*node                      // in myid order
}

// StartStandalone starts one standalone ZooKeeper server and waits until it
// serves. It is removed in t.Cleanup.
func StartStandalone(t testing.TB) *Ensemble {
	t.Helper()
	return StartEnsemble(t, 1)
}

// StartEnsemble starts an ensemble of n servers (n = 1: a standalone
// server) and waits until every one serves: one leader, the others its
// followers. Containers and network are removed in t.Cleanup, also when
// the test fails.
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	if n < 1 || n > 9 {
		t.Fatalf("zktest: an ensemble of %d servers; want 1 to 9", n)
	}
	cli := dockerEngine(t)
	image := Image()
	requireImage(t, cli, image)

	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	nw, err := createNetwork(ctx, t, cli)
	if err != nil {
		t.Fatalf("zktest: %v", err)
	}
	e := &Ensemble{t: t, docker: cli, network: nw}
	// Cleanups run last-registered first: the containers go, then their
	// network.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := nw.Remove(ctx); err != nil {
			t.Errorf("zktest: remove network %s: %v", nw.Name, err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			e.logTails()
		}
		for _, nd := range e.nodes {
			if err := terminate(cli, nd.container); err != nil {
				t.Errorf("zktest: remove %s: %v", nd.name, err)
			}
		}
	})

	servers := make([]string, n)
	for i := range servers {
		servers[i] = nw.serverAddr(i).String()
	}
	cfg := zooCfg(servers)
	for i := range n {
		nd, err := startNode(ctx, t, cli, image, nw, i, cfg)
		if err != nil {
			t.Fatalf("zktest: %v", err)
		}
		e.nodes = append(e.nodes, nd)
	}
	e.WaitServing()
	t.Logf("zktest: %d ZooKeeper server(s) of %s serving at %s", n, image, strings.Join(e.Addrs(), ","))
	return e
}

// Size is the number of servers.
func (e *Ensemble) Size() int { return len(e.nodes) }

// Addr is server i's client address on 127.0.0.1. It does not change when
// the server is stopped, killed, started, disconnected or connected.
func (e *Ensemble) Addr(i int) string { return e.node(i).addr }

// Addrs are the client addresses of all servers, in order: a ZooKeeper
// client's server list.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.nodes))
	for i, nd := range e.nodes {
		addrs[i] = nd.addr
	}
	return addrs
}

// Network is the name of the servers' Docker network. A container that
// joins it (a broker, later) reaches the servers at ConnectString.
func (e *Ensemble) Network() string { return e.network.Name }

// ConnectString is the servers' list as seen from inside Network, in the
// form of Kafka's zookeeper.connect: "zk1:2181,zk2:2181,zk3:2181".
func (e *Ensemble) ConnectString() string {
	hosts := make([]string, len(e.nodes))
	for i, nd := range e.nodes {
		hosts[i] = fmt.Sprintf("%s:%d", nd.name, clientPort)
	}
	return strings.Join(hosts, ",")
}

// Mode is server i's answer to srvr: "leader", "follower" or "standalone",
// or "" when it does not serve (down, paused, cut off, without a quorum).
func (e *Ensemble) Mode(i int) string {
	mode, err := serverMode(e.t.Context(), e.node(i).addr)
	if err != nil {
		return ""
	}
	return mode
}

// Serving reports whether server i serves clients now.
func (e *Ensemble) Serving(i int) bool { return e.Mode(i) != "" }

// WaitServing waits until each server listed serves clients (all of them
// when none is listed), and fails the test with each one's last answer
// when that does not happen within a minute.
func (e *Ensemble) WaitServing(indexes ...int) {
	e.t.Helper()
	if len(indexes) == 0 {
		for i := range e.nodes {
			indexes = append(indexes, i)
		}
	}
	var last []error
	ok := Eventually(e.t, startTimeout, func() bool {
		last = last[:0]
		for _, i := range indexes {
			if _, err := serverMode(e.t.Context(), e.node(i).addr); err != nil {
				last = append(last, fmt.Errorf("%s: %w", e.node(i).name, err))
			}
		}
		return len(last) == 0
	})
	if !ok {
		e.t.Fatalf("zktest: servers not serving after %v: %v", startTimeout, errors.Join(last...))
	}
}

// Leader waits until a server is the ensemble's leader and returns its
// index. After the leader is lost this is the new one, once elected.
func (e *Ensemble) Leader() int {
	e.t.Helper()
	leader := -1
	WaitFor(e.t, startTimeout, "a ZooKeeper leader", func() bool {
		for i := range e.nodes {
			if e.Mode(i) == "leader" {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// Kill crashes server i: SIGKILL, no shutdown. The kernel resets its TCP
// connections, so its clients and peers notice at once; the clients move to
// another server. Start brings it back.
func (e *Ensemble) Kill(i int) {
	e.t.Helper()
	e.do(i, "kill", func(ctx context.Context, nd *node) error {
		return nd.kill(ctx, e.docker)
	})
}

// Stop shuts server i down cleanly (SIGTERM, then SIGKILL after 10 s) and
// waits until it has stopped. Start brings it back.
func (e *Ensemble) Stop(i int) {
	e.t.Helper()
	e.do(i, "stop", func(ctx context.Context, nd *node) error {
		grace := stopGrace
		return nd.container.Stop(ctx, &grace)
	})
}

// Start starts a killed or stopped server i again, at the same address and
// with its data: it rejoins the ensemble and catches up from the leader.
// It returns before the server serves (WaitServing).
func (e *Ensemble) Start(i int) {
	e.t.Helper()
	e.do(i, "start", func(ctx context.Context, nd *node) error {
		return nd.container.Start(ctx)
	})
}

// Pause freezes every process of server i, like a garbage-collection pause
// that does not end. The kernel still accepts TCP connections for it but
// nothing answers: its peers drop it after syncLimit ticks, its clients
// time out after 2/3 of their session timeout and move to another server.
// Sessions are expired by the leader (or a standalone server): frozen, it
// expires none; thawed, it finds its clients' sessions overdue and may
// expire them at once. Unpause thaws it.
func (e *Ensemble) Pause(i int) {
	e.t.Helper()
	e.do(i, "pause", func(ctx context.Context, nd *node) error {
		_, err := e.docker.ContainerPause(ctx, nd.container.GetContainerID(), client.ContainerPauseOptions{})
		return err
	})
}

// Unpause thaws a paused server i. It carries on as if no time had passed,
// and finds that the ensemble has moved on without it.
func (e *Ensemble) Unpause(i int) {
	e.t.Helper()
	e.do(i, "unpause", func(ctx context.Context, nd *node) error {
		_, err := e.docker.ContainerUnpause(ctx, nd.container.GetContainerID(), client.ContainerUnpauseOptions{})
		return err
	})
}

// Disconnect takes server i off the ensemble's network: a partition with
// the server alone on its side. It reaches no peer, no peer reaches it, and
// its published client port goes away, so clients reach it no more either
// (connections are refused). Connect ends the partition.
func (e *Ensemble) Disconnect(i int) {
	e.t.Helper()
	e.do(i, "disconnect", func(ctx context.Context, nd *node) error {
		_, err := e.docker.NetworkDisconnect(ctx, e.network.ID, client.NetworkDisconnectOptions{
			Container: nd.container.GetContainerID(),
		})
		return err
	})
}

// Connect puts a disconnected server i back on the network, under its name
// and at its client address.
func (e *Ensemble) Connect(i int) {
	e.t.Helper()
	e.do(i, "connect", func(ctx context.Context, nd *node) error {
		_, err := e.docker.NetworkConnect(ctx, e.network.ID, client.NetworkConnectOptions{
			Container: nd.container.GetContainerID(),
			// Aliases and addresses are per connection: ask for both
			// again, or the server comes back nameless, at whatever
			// address Docker has free (see ensembleNetwork).
			EndpointConfig: &network.EndpointSettings{
				Aliases:    []string{nd.name},
				IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: nd.ip},
			},
		})
		return err
	})
}

// do runs one fault verb on server i and fails the test if Docker refuses.
func (e *Ensemble) do(i int, verb string, f func(context.Context, *node) error) {
	e.t.Helper()
	nd := e.node(i)
	ctx, cancel := context.WithTimeout(e.t.Context(), opTimeout)
	defer cancel()
	if err := f(ctx, nd); err != nil {
		e.t.Fatalf("zktest: %s %s: %v", verb, nd.name, err)
	}
	e.t.Logf("zktest: %s %s (%s)", verb, nd.name, nd.addr)
}

// node returns server i, failing the test for an index out of range.
func (e *Ensemble) node(i int) *node {
	e.t.Helper()
	if i < 0 || i >= len(e.nodes) {
		e.t.Fatalf("zktest: no server %d in an ensemble of %d", i, len(e.nodes))
	}
	return e.nodes[i]
}

// logTails prints the end of every server's log, for a failed test.
func (e *Ensemble) logTails() {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, nd := range e.nodes {
		tail, err := nd.logTail(ctx, logLines)
		if err != nil {
			e.t.Logf("zktest: %v", err)
			continue
		}
		e.t.Logf("zktest: last %d lines of %s's log:\n%s", logLines, nd.name, tail)
	}
}
