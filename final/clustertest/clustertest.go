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
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
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
	c, addr, err := startContainer(t, ens, spec{name: name, image: image, containerPort: 9092,
		request: func(req *testcontainers.ContainerRequest, hostAddr string) {
			settings := map[string]string{
				"broker.id":                        strconv.Itoa(int(id)),
				"zookeeper.connect":                ens.ConnectString(),
				"zookeeper.session.timeout.ms":     strconv.Itoa(int(zktest.SessionTimeout / time.Millisecond)),
				"listeners":                        "PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:9093",
				"advertised.listeners":             fmt.Sprintf("PLAINTEXT://%s,INTERNAL://%s:9093", hostAddr, name),
				"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
				"inter.broker.listener.name":       "INTERNAL",
				"offsets.topic.replication.factor": "1",
				"group.initial.rebalance.delay.ms": "0",
			}
			maps.Copy(settings, props)
			for _, k := range slices.Sorted(maps.Keys(settings)) {
				req.Cmd = append(req.Cmd, "--override", k+"="+settings[k])
			}
			req.WaitingFor = wait.ForLog("final broker started").WithStartupTimeout(60 * time.Second)
		}}, func(c testcontainers.Container, failedStart bool) {
		b.container = c
		if failedStart {
			b.printLogs(t)
		}
		b.terminate(t)
	})
	if err != nil {
		t.Fatalf("clustertest: start broker %d from %s: %v (build the image with `make images`)", id, image, err)
	}
	b.container, b.Addr = c, addr
	return b
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
	terminate(t, b.container, b.Name)
}
