package clustertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
	"github.com/kafkaworkbook/workbook/final/clustertest"
)

// TestBrokerImageServesClients: two brokers of the image built FROM
// scratch, on a ZooKeeper container's network, replicate to each other on
// their INTERNAL listener and serve a client on this machine through their
// published PLAINTEXT ports, which Metadata advertises: an acks=all
// produce with min.insync.replicas=2 is read back whole.
func TestBrokerImageServesClients(t *testing.T) {
	c := clustertest.Start(t, cluster.Config{ZooKeepers: 1, Brokers: 2,
		BrokerProps: map[string]string{"offsets.topic.replication.factor": "2"}})
	addrs := c.BootstrapServers()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[0]), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	md, err := adm.BrokerMetadata(ctx)
	require.NoError(t, err)
	var told []string
	for _, b := range md.Brokers {
		told = append(told, fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
	slices.Sort(told)
	slices.Sort(addrs)
	require.Equal(t, addrs, told, "each broker advertises its published PLAINTEXT port")

	created, err := adm.CreateTopic(ctx, 2, 2, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("order %03d", i))
	}
	require.Eventually(t, func() bool { // until both partitions have leaders and a full ISR
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(want[0])}).FirstErr() == nil
	}, 60*time.Second, 200*time.Millisecond, "acks=all with both replicas in sync")
	for _, v := range want[1:] {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr())
	}
	var got []string
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(got), len(want))
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.ElementsMatch(t, want, got)
}

// query asks Prometheus for an instant vector and returns each sample's
// value by its instance label.
func query(t *testing.T, addr, q string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		v, err := strconv.ParseFloat(r.Value[1].(string), 64)
		require.NoError(t, err)
		out[r.Metric["instance"]] = v
	}
	return out
}

// TestPrometheusScrapesEveryBroker: Prometheus, from Debian's package in a
// container on the brokers' network, scrapes each broker's
// metrics.prometheus.listener under Kafka's names: every target is up,
// the active controller counts sum to 1, and the records produced show in
// MessagesIn.
func TestPrometheusScrapesEveryBroker(t *testing.T) {
	c := clustertest.Start(t, cluster.Config{ZooKeepers: 1, Brokers: 2, Prometheus: true,
		BrokerProps: map[string]string{"offsets.topic.replication.factor": "2"}})
	brokers := c.Brokers()
	promNode, _ := c.Prometheus()
	prom := promNode.Addr

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].Addr), kgo.DefaultProduceTopic("metered"))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	created, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 2, nil, "metered")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	for i := range 20 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}

	require.Eventually(t, func() bool {
		up := query(t, prom, `up{job="kafka"}`)
		return len(up) == len(brokers) && up[fmt.Sprintf("%s:%d", brokers[0].Name, cluster.MetricsPort)] == 1 &&
			up[fmt.Sprintf("%s:%d", brokers[1].Name, cluster.MetricsPort)] == 1
	}, 30*time.Second, 500*time.Millisecond, "every broker's target is up")
	require.Eventually(t, func() bool {
		sum := query(t, prom, `sum(kafka_controller_kafkacontroller_activecontrollercount)`)
		in := query(t, prom, `sum(kafka_server_brokertopicmetrics_messagesin_total{topic="metered"})`)
		return sum[""] == 1 && in[""] == 20
	}, 30*time.Second, 500*time.Millisecond, "one active controller, 20 records in, as Prometheus sees them")
}
