package clustertest

import (
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
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// PrometheusImage is the Prometheus image scripts/images.sh builds from
// Debian's package.
const PrometheusImage = "kafkaworkbook/prometheus:2.42.0"

// MetricsPort is where StartBroker's brokers serve their metrics inside
// the network (metrics.prometheus.listener=0.0.0.0:9404).
const MetricsPort = 9404

// StartPrometheus starts Prometheus on ens's network, scraping every
// broker's metrics every second (job "kafka"), and returns its HTTP
// address on 127.0.0.1. It is removed at the test's cleanup.
func StartPrometheus(t testing.TB, ens *zktest.Ensemble, brokers []*Broker) string {
	t.Helper()
	var targets []string
	for _, b := range brokers {
		targets = append(targets, fmt.Sprintf("%q", net.JoinHostPort(b.Name, strconv.Itoa(MetricsPort))))
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: kafka
    static_configs:
      - targets: [%s]
`, strings.Join(targets, ", "))
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s-prometheus", ens.Network()[:min(8, len(ens.Network()))])
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:          PrometheusImage,
			Name:           name,
			ExposedPorts:   []string{"9090/tcp"},
			Networks:       []string{ens.Network()},
			NetworkAliases: map[string][]string{ens.Network(): {name}},
			Labels:         zktest.Labels(t),
			Files: []testcontainers.ContainerFile{{Reader: strings.NewReader(config),
				ContainerFilePath: "/etc/prometheus/prometheus.yml", FileMode: 0o644}},
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.PortBindings = network.PortMap{network.MustParsePort("9090/tcp"): {{
					HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}}}
			},
			WaitingFor: wait.ForLog("Server is ready to receive web requests").WithStartupTimeout(60 * time.Second),
		},
		Started: true,
		Logger:  tclog.TestLogger(t),
	}
	c, err := testcontainers.GenericContainer(context.Background(), req)
	if c != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c.Terminate(ctx, testcontainers.StopTimeout(0))
		})
	}
	if err != nil {
		t.Fatalf("clustertest: start Prometheus from %s: %v (build the image with `make images`)", PrometheusImage, err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
