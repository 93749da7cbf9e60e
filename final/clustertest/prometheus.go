package clustertest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
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
	name := fmt.Sprintf("%s-prometheus", ens.Network()[:min(8, len(ens.Network()))])
	_, addr, err := startContainer(t, ens, spec{name: name, image: PrometheusImage, containerPort: 9090,
		request: func(req *testcontainers.ContainerRequest, _ string) {
			req.Files = []testcontainers.ContainerFile{{Reader: strings.NewReader(config),
				ContainerFilePath: "/etc/prometheus/prometheus.yml", FileMode: 0o644}}
			req.WaitingFor = wait.ForLog("Server is ready to receive web requests").WithStartupTimeout(60 * time.Second)
		}}, func(c testcontainers.Container, _ bool) { terminate(t, c, name) })
	if err != nil {
		t.Fatalf("clustertest: start Prometheus from %s: %v (build the image with `make images`)", PrometheusImage, err)
	}
	return addr
}
