// Package clustertest runs the final broker's container image
// (kafkaworkbook/broker:dev, built by scripts/images.sh from this
// checkout) on a zktest ensemble's Docker network, for tests that need
// brokers in containers: a crash is the container's, a partition is a
// network's. Each broker has two listeners: PLAINTEXT (container port
// 9092) published on a 127.0.0.1 port and advertised there, for clients on
// this machine, and INTERNAL (9093), advertised as the container's name on
// the network, for the brokers among themselves.
package clustertest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// DefaultImage is the broker image scripts/images.sh builds.
const DefaultImage = "kafkaworkbook/broker:dev"

// ImageEnv overrides DefaultImage.
const ImageEnv = "CLUSTERTEST_IMAGE"

// Broker is one broker container.
type Broker struct {
	ID        int32
	Name      string // the container's name, and its host name on the network
	Addr      string // 127.0.0.1:<port>: its PLAINTEXT listener, as clients reach and are told it
	container testcontainers.Container
}

// StartBrokers starts n brokers, ids 0..n-1, on ens's network, each with
// props over the defaults below, and waits until each has started. They
// are removed at the test's cleanup.
func StartBrokers(t testing.TB, ens *zktest.Ensemble, n int, props map[string]string) []*Broker {
	t.Helper()
	var out []*Broker
	for id := range int32(n) {
		out = append(out, StartBroker(t, ens, id, props))
	}
	return out
}

// StartBroker starts broker id. Short ZooKeeper timeouts (zktest's) and
// an offsets topic that fits small clusters are its defaults.
func StartBroker(t testing.TB, ens *zktest.Ensemble, id int32, props map[string]string) *Broker {
	t.Helper()
	image := DefaultImage
	if img := os.Getenv(ImageEnv); img != "" {
		image = img
	}
	name := fmt.Sprintf("%s-broker-%d", ens.Network()[:min(8, len(ens.Network()))], id)
	b := &Broker{ID: id, Name: name}
	var lastErr error
	for range 3 { // a port taken between our check and Docker's bind: try another
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		b.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		settings := map[string]string{
			"broker.id":                        strconv.Itoa(int(id)),
			"zookeeper.connect":                ens.ConnectString(),
			"zookeeper.session.timeout.ms":     strconv.Itoa(int(zktest.SessionTimeout / time.Millisecond)),
			"listeners":                        "PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:9093",
			"advertised.listeners":             fmt.Sprintf("PLAINTEXT://%s,INTERNAL://%s:9093", b.Addr, name),
			"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
			"inter.broker.listener.name":       "INTERNAL",
			"offsets.topic.replication.factor": "1",
			"group.initial.rebalance.delay.ms": "0",
		}
		maps.Copy(settings, props)
		var cmd []string
		for _, k := range slices.Sorted(maps.Keys(settings)) {
			cmd = append(cmd, "--override", k+"="+settings[k])
		}
		req := testcontainers.GenericContainerRequest{
			ContainerRequest: testcontainers.ContainerRequest{
				Image:          image,
				Name:           name,
				Cmd:            cmd,
				ExposedPorts:   []string{"9092/tcp"},
				Networks:       []string{ens.Network()},
				NetworkAliases: map[string][]string{ens.Network(): {name}},
				Labels:         zktest.Labels(t),
				ConfigModifier: func(c *container.Config) { c.Hostname = name },
				HostConfigModifier: func(hc *container.HostConfig) {
					// Loopback only: nothing outside this machine reaches a test broker.
					hc.PortBindings = network.PortMap{network.MustParsePort("9092/tcp"): {{
						HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}}}
				},
				WaitingFor: wait.ForLog("final broker started").WithStartupTimeout(60 * time.Second),
			},
			Started: true,
			Logger:  tclog.TestLogger(t),
		}
		c, err := testcontainers.GenericContainer(context.Background(), req)
		if err == nil {
			b.container = c
			t.Cleanup(func() { b.terminate(t) })
			return b
		}
		if c != nil {
			b.container = c
			b.printLogs(t)
			b.terminate(t)
		}
		lastErr = err
		if !strings.Contains(err.Error(), "already allocated") && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("clustertest: start broker %d from %s: %v (build the image with `make images`)", id, image, lastErr)
	return nil
}

// printLogs prints the end of the broker's log, for a failed start or test.
func (b *Broker) printLogs(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := b.container.Logs(ctx)
	if err != nil {
		return
	}
	defer r.Close()
	buf := make([]byte, 1<<20)
	n, _ := r.Read(buf)
	lines := strings.Split(strings.TrimSpace(string(buf[:n])), "\n")
	t.Logf("clustertest: last lines of %s's log:\n%s", b.Name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
}

// terminate removes the container (after printing its log if the test
// failed).
func (b *Broker) terminate(t testing.TB) {
	if t.Failed() {
		b.printLogs(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.container.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil {
		t.Logf("clustertest: remove %s: %v", b.Name, err)
	}
}

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("clustertest: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
