package zktest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// Label marks every container and network the harness creates, with the
// test's name as its value: `docker ps -a --filter label=org.kafkaworkbook.zktest`
// lists them.
const Label = "org.kafkaworkbook.zktest"

// node is one ZooKeeper server in its container.
type node struct {
	index     int                             // position in the ensemble, from 0 (myid is index+1)
	name      string                          // hostname on the ensemble network: zk1, zk2, ...
	ip        netip.Addr                      // fixed address on the ensemble network
	addr      string                          // client address on 127.0.0.1, the same across restarts
	container *testcontainers.DockerContainer // never nil once started
}

// startNode creates and starts server i of an ensemble on network nw, with
// the zoo.cfg given. It does not wait for ZooKeeper to serve.
func startNode(ctx context.Context, t testing.TB, cli client.APIClient, image string, nw *ensembleNetwork, i int, cfg string) (*node, error) {
	nd := &node{index: i, name: hostname(i), ip: nw.serverAddr(i)}
	files := []testcontainers.ContainerFile{
		{Reader: strings.NewReader(cfg), ContainerFilePath: "/conf/zoo.cfg", FileMode: 0o644},
		// Ignored by a standalone server.
		{Reader: strings.NewReader(strconv.Itoa(i + 1)), ContainerFilePath: "/data/myid", FileMode: 0o644},
	}
	// The host port is chosen here, not by Docker, so that the address
	// stays the same when the node is stopped and started or disconnected
	// and connected: Docker picks a new ephemeral port each time, and a
	// client's server list would go stale. Another process could take the
	// port between our check and Docker's bind; then we try another.
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		req := testcontainers.GenericContainerRequest{
			ContainerRequest: testcontainers.ContainerRequest{
				Image:          image,
				Name:           fmt.Sprintf("zktest-%s-%s", nw.Name[:8], nd.name),
				Cmd:            serverCommand(),
				ExposedPorts:   []string{fmt.Sprintf("%d/tcp", clientPort)},
				Networks:       []string{nw.Name},
				NetworkAliases: map[string][]string{nw.Name: {nd.name}},
				Files:          files,
				Labels:         labels(t),
				ConfigModifier: func(c *container.Config) { c.Hostname = nd.name },
				EndpointSettingsModifier: func(eps map[string]*network.EndpointSettings) {
					if ep := eps[nw.Name]; ep != nil {
						ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: nd.ip}
					}
				},
				HostConfigModifier: func(hc *container.HostConfig) {
					hc.Sysctls = map[string]string{
						// Give up on a TCP peer that stopped acknowledging
						// after about 3 s, not 15 minutes: across a
						// partition, a connection that looks alive but is
						// not keeps ZooKeeper from opening a new one.
						"net.ipv4.tcp_retries2": "3",
					}
					// Published on loopback only: nothing outside this
					// machine may reach, or be reached by, a test server.
					hc.PortBindings = network.PortMap{
						network.MustParsePort(fmt.Sprintf("%d/tcp", clientPort)): {{
							HostIP:   netip.MustParseAddr("127.0.0.1"),
							HostPort: strconv.Itoa(port),
						}},
					}
				},
			},
			Started: true,
			Logger:  tclog.TestLogger(t),
		}
		c, err := testcontainers.GenericContainer(ctx, req)
		if err == nil {
			nd.container = c.(*testcontainers.DockerContainer)
			nd.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			return nd, nil
		}
		if c != nil {
			terminate(cli, c)
		}
		lastErr = err
		if !strings.Contains(err.Error(), "already allocated") && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, fmt.Errorf("start %s: %w", nd.name, lastErr)
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listens on now:
// the host port a harness publishes a container's port on (final's
// clustertest publishes its brokers' this way).
func FreePort() (int, error) { return freePort() }

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// terminate removes a container whatever its state, for cleanup.
func terminate(cli client.APIClient, c testcontainers.Container) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if dc, ok := c.(*testcontainers.DockerContainer); ok && dc != nil {
		// A paused container cannot be stopped; thaw it first.
		if st, err := dc.State(ctx); err == nil && st.Paused {
			if _, err := cli.ContainerUnpause(ctx, dc.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
				return fmt.Errorf("unpause before removing: %w", err)
			}
		}
	}
	// No grace period: the test is over, and ZooKeeper has nothing to save.
	return c.Terminate(ctx, testcontainers.StopTimeout(0))
}

// kill sends SIGKILL and waits until the container has stopped, so that a
// Start right after it finds a stopped container.
func (nd *node) kill(ctx context.Context, cli client.APIClient) error {
	id := nd.container.GetContainerID()
	if _, err := cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", nd.name, err)
	}
	for {
		st, err := nd.container.State(ctx)
		if err != nil {
			return fmt.Errorf("kill %s: %w", nd.name, err)
		}
		if !st.Running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kill %s: still running: %w", nd.name, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// logTail returns the last lines of the server's log (ZooKeeper logs to
// stderr through slf4j-simple).
func (nd *node) logTail(ctx context.Context, lines int) (string, error) {
	rc, err := nd.container.Logs(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s: %w", nd.name, err)
	}
	defer rc.Close()
	var tail []string
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		tail = append(tail, sc.Text())
		if len(tail) > lines {
			tail = tail[1:]
		}
	}
	return strings.Join(tail, "\n"), sc.Err()
}
