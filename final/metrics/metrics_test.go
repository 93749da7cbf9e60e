package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/metrics"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
	s6 "github.com/kafkaworkbook/workbook/stage06-performance/server"
)

// node is an in-process stage 06 broker with its metrics endpoint.
type node struct {
	s   *s5.Server
	url string
}

// startNodes starts n brokers on ens, each with its metrics served on a
// port of its own, with brokertest's keys (short sessions and ISR lag).
func startNodes(t *testing.T, ens *zktest.Ensemble, n int) []*node {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("METRICS_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var nodes []*node
	for id := range n {
		props := maps.Clone(brokertest.Defaults)
		maps.Copy(props, map[string]string{"broker.id": fmt.Sprint(id), "listeners": "PLAINTEXT://127.0.0.1:0",
			"log.dirs": filepath.Join(t.TempDir(), "logs"), s5.KeyZookeeperConnect: ens.Addrs()[0]})
		cfg, err := s5.ParseConfig(props, logger)
		require.NoError(t, err)
		s, err := s6.New(cfg, s6.Options{Options: s5.Options{Logger: logger}})
		require.NoError(t, err)
		m, err := metrics.New(s)
		require.NoError(t, err)
		require.NoError(t, s.Start())
		e, err := m.Serve("127.0.0.1:0", logger)
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, e.Close(ctx))
			require.NoError(t, s.Shutdown(ctx))
			m.Close()
		})
		nodes = append(nodes, &node{s: s, url: "http://" + e.Addr().String() + "/metrics"})
	}
	return nodes
}

// scrape reads the node's endpoint as Prometheus does.
func (n *node) scrape(t *testing.T) scraped {
	t.Helper()
	resp, err := http.Get(n.url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	return families
}

// scraped is one scrape's metric families by name.
type scraped map[string]*dto.MetricFamily

// value is the value of name's series whose labels include labels
// (name/value pairs); a histogram's value is its count. It fails the test
// if there is no such series.
func (s scraped) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.lookup(name, labels...)
	require.True(t, ok, "no series %s%v", name, labels)
	return v
}

func (s scraped) lookup(name string, labels ...string) (float64, bool) {
	f, ok := s[name]
	if !ok {
		return 0, false
	}
series:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// sum adds name's series over every node's scrape.
func sum(t *testing.T, nodes []*node, name string) float64 {
	total := 0.0
	for _, n := range nodes {
		total += n.scrape(t).value(t, name)
	}
	return total
}

// eventually polls cond (which may scrape) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 60*time.Second, 50*time.Millisecond, what)
}

// TestKafkasMetricsOnAThreeBrokerCluster scrapes three brokers of a real
// cluster (ZooKeeper in a container, the brokers in this process) over
// HTTP as Prometheus does, and checks that each metric of the package's
// table is there and moves as Kafka's does: one active controller in the
// cluster, BytesIn and MessagesIn by what was produced, BytesOut by what
// was consumed, Produce requests timed, and a follower that stops fetching
// shrinking the ISR (UnderReplicatedPartitions > 0, IsrShrinks + 1) until
// it fetches again (IsrExpands + 1, UnderReplicatedPartitions 0).
func TestKafkasMetricsOnAThreeBrokerCluster(t *testing.T) {
	ens := zktest.StartStandalone(t)
	nodes := startNodes(t, ens, 3)
	eventually(t, "one active controller", func() bool {
		return sum(t, nodes, "kafka_controller_kafkacontroller_activecontrollercount") == 1
	})

	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.s.Addr().String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("metered"), kgo.RequiredAcks(kgo.AllISRAcks()))
	require.NoError(t, err)
	defer cl.Close()
	created, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 3, nil, "metered")
	require.NoError(t, err)
	require.NoError(t, created["metered"].Err)

	// The leader, once all three replicas are in its ISR.
	var leader *node
	var followers []*node
	eventually(t, "a leader with the three replicas in its ISR", func() bool {
		leader, followers = nil, nil
		for _, n := range nodes {
			p, ok := n.s.Replicas.Partition("metered", 0)
			if !ok {
				return false
			}
			if _, isr := p.Replicas(); p.Role() == replica.Leader && len(isr) == 3 {
				leader = n
			} else {
				followers = append(followers, n)
			}
		}
		return leader != nil
	})

	before := leader.scrape(t)
	const records, valueSize = 50, 100
	for i := range records {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%0*d", valueSize, i)}).FirstErr())
	}
	p, _ := leader.s.Replicas.Partition("metered", 0)
	stored := p.Log.Size()
	after := leader.scrape(t)
	grown := func(name string) float64 { // the topic's series did not exist before
		return after.value(t, name, "topic", "metered") - valueOr(before, name, "topic", "metered")
	}
	require.Equal(t, float64(records), grown("kafka_server_brokertopicmetrics_messagesin_total"))
	require.Equal(t, float64(stored), grown("kafka_server_brokertopicmetrics_bytesin_total"),
		"BytesIn is the batches as produced, which the log stores as they came")
	require.Equal(t, float64(records), after.value(t, "kafka_server_brokertopicmetrics_messagesin_total", "topic", "")-
		before.value(t, "kafka_server_brokertopicmetrics_messagesin_total", "topic", ""), "every topic together")
	// A request is timed once its answer is written, which may be after
	// the client read it: poll.
	eventually(t, "every Produce request timed and counted", func() bool {
		now := leader.scrape(t)
		timed := valueOr(now, "kafka_network_requestmetrics_totaltimems", "request", "Produce")
		var counted float64
		for _, m := range now["kafka_network_requestmetrics_requests_total"].GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == "request" && l.GetValue() == "Produce" {
					counted += m.Counter.GetValue()
				}
			}
		}
		// One Produce request a synchronous record, at least; RequestsPerSec
		// counts what TotalTimeMs times.
		return timed-valueOr(before, "kafka_network_requestmetrics_totaltimems", "request", "Produce") >= records && counted == timed
	})

	// A consumer reads it all back: BytesOut grows by the records' bytes.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("metered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cons.Close()
	for read := 0; read < records; {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		read += fs.NumRecords()
	}
	eventually(t, "BytesOut to count the stored bytes", func() bool {
		return leader.scrape(t).value(t, "kafka_server_brokertopicmetrics_bytesout_total", "topic", "metered") >= float64(stored)
	})

	// Every metric of the table is exposed.
	all := leader.scrape(t)
	for _, name := range []string{
		"kafka_server_replicamanager_underreplicatedpartitions", "kafka_server_replicamanager_partitioncount",
		"kafka_server_replicamanager_leadercount", "kafka_server_replicamanager_isrshrinks_total",
		"kafka_server_replicamanager_isrexpands_total",
		"kafka_controller_kafkacontroller_activecontrollercount", "kafka_controller_kafkacontroller_offlinepartitionscount",
		"kafka_controller_kafkacontroller_globalpartitioncount",
		"kafka_server_brokertopicmetrics_bytesin_total", "kafka_server_brokertopicmetrics_bytesout_total",
		"kafka_server_brokertopicmetrics_messagesin_total", "kafka_server_brokertopicmetrics_failedproducerequests_total",
		"kafka_network_requestchannel_requestqueuesize", "kafka_network_socketserver_networkprocessoravgidle_percent",
		"kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
		"kafka_network_requestmetrics_requests_total", "kafka_network_requestmetrics_totaltimems",
		"kafka_network_requestmetrics_requestqueuetimems", "kafka_network_requestmetrics_localtimems",
		"kafka_network_requestmetrics_remotetimems", "kafka_network_requestmetrics_responsesendtimems",
		"kafka_server_delayedoperationpurgatory_purgatorysize", "kafka_server_delayedoperationpurgatory_numdelayedoperations",
		"kafka_log_logflushstats_logflushrateandtimems", "kafka_server_kafkaserver_brokerstate",
		"go_goroutines", "process_cpu_seconds_total",
	} {
		require.Contains(t, all, name)
	}
	for _, request := range []string{"Produce", "Fetch", "FetchConsumer", "FetchFollower", "ApiVersions"} {
		all.value(t, "kafka_network_requestmetrics_totaltimems", "request", request)
	}
	metadata := 0.0 // the clients may have asked another broker
	for _, n := range nodes {
		metadata += valueOr(n.scrape(t), "kafka_network_requestmetrics_totaltimems", "request", "Metadata")
	}
	require.Positive(t, metadata)
	for _, op := range []string{"Produce", "Fetch", "Heartbeat", "Rebalance"} {
		all.value(t, "kafka_server_delayedoperationpurgatory_purgatorysize", "delayedOperation", op)
	}
	require.Equal(t, 3.0, all.value(t, "kafka_server_kafkaserver_brokerstate"))
	require.Equal(t, 1.0, all.value(t, "kafka_server_replicamanager_leadercount"))
	for _, idle := range []string{"kafka_network_socketserver_networkprocessoravgidle_percent", "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent"} {
		v := all.value(t, idle)
		require.True(t, v > 0 && v <= 1, "%s = %v: a mostly idle broker", idle, v)
	}
	require.Equal(t, 0.0, sum(t, nodes, "kafka_controller_kafkacontroller_offlinepartitionscount"))

	// A follower stops fetching and falls behind: the leader shrinks the
	// ISR.
	shrinks := all.value(t, "kafka_server_replicamanager_isrshrinks_total")
	expands := all.value(t, "kafka_server_replicamanager_isrexpands_total")
	require.Zero(t, all.value(t, "kafka_server_replicamanager_underreplicatedpartitions"))
	followers[0].s.Replicas.PauseFetching(true)
	// A follower at the log end stays in sync, as in Kafka: it falls
	// behind with the next record, which acks=all answers once the ISR
	// has shrunk.
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after the pause")}).FirstErr())
	eventually(t, "the leader to count the partition under-replicated, and one ISR shrink", func() bool {
		now := leader.scrape(t)
		return now.value(t, "kafka_server_replicamanager_underreplicatedpartitions") == 1 &&
			now.value(t, "kafka_server_replicamanager_isrshrinks_total") == shrinks+1
	})

	followers[0].s.Replicas.PauseFetching(false)
	eventually(t, "the follower to rejoin: no partition under-replicated, one ISR expansion", func() bool {
		now := leader.scrape(t)
		return now.value(t, "kafka_server_replicamanager_underreplicatedpartitions") == 0 &&
			now.value(t, "kafka_server_replicamanager_isrexpands_total") == expands+1
	})
	final := leader.scrape(t)
	require.Equal(t, shrinks+1, final.value(t, "kafka_server_replicamanager_isrshrinks_total"), "no other shrink")
	require.Equal(t, 1.0, sum(t, nodes, "kafka_controller_kafkacontroller_activecontrollercount"))
}

func valueOr(s scraped, name string, labels ...string) float64 {
	v, _ := s.lookup(name, labels...)
	return v
}
