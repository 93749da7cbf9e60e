package server_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// twoListenerProps give every broker an INTERNAL listener, which the
// brokers use among themselves, and an EXTERNAL one for clients.
var twoListenerProps = map[string]string{
	"listeners":                      "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
	"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
	"inter.broker.listener.name":     "INTERNAL",
}

// listenerAddrs reads each broker's registration and returns its
// addresses by listener name, by broker id.
func listenerAddrs(t *testing.T, zk *kafkazk.Client) map[string]map[int32]string {
	t.Helper()
	regs, err := zk.Brokers()
	require.NoError(t, err)
	out := map[string]map[int32]string{}
	for _, b := range regs {
		var names []string
		for _, e := range b.Endpoints {
			require.Equal(t, "PLAINTEXT", e.SecurityProtocol, "broker %d listener %s", b.ID, e.Listener)
			names = append(names, e.Listener)
			if out[e.Listener] == nil {
				out[e.Listener] = map[int32]string{}
			}
			out[e.Listener][b.ID] = net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
		}
		require.Equal(t, []string{"INTERNAL", "EXTERNAL"}, names, "broker %d registers every listener, in order", b.ID)
	}
	return out
}

// metadataAddrs is what a client bootstrapped on seed is told: every
// broker's address, by id.
func metadataAddrs(ctx context.Context, seed string) (map[int32]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	meta, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int32]string{}
	for _, b := range meta.Brokers {
		out[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return out, nil
}

// A three-broker cluster with two listeners each: a client bootstrapping
// on the EXTERNAL listener of one broker is told every broker's EXTERNAL
// address (and a client on INTERNAL the INTERNAL ones), produces and
// consumes there, finds its group coordinator there; the followers fetch
// from their leader's INTERNAL address, which the controller put in
// LeaderAndIsr, and a controlled shutdown reaches the controller there too.
func TestClientsAreToldTheAddressesOfTheirListener(t *testing.T) {
	ens := zktest.StartEnsemble(t, 1)
	c := brokertest.Start(t, ens, 3, twoListenerProps)
	zk := observer(t, ens)
	addrs := listenerAddrs(t, zk)
	internal, external := addrs["INTERNAL"], addrs["EXTERNAL"]
	require.Len(t, external, 3)
	for id := range int32(3) {
		require.Equal(t, c.Broker(id).Addr(), internal[id], "the broker's address is its inter-broker listener's")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, want := range []map[int32]string{external, internal} {
		require.Eventually(t, func() bool {
			got, err := metadataAddrs(ctx, want[0])
			return err == nil && maps.Equal(got, want)
		}, 30*time.Second, 20*time.Millisecond, "a client bootstrapped on %s is told %v", want[0], want)
	}

	// Everything a client does, on EXTERNAL alone; acks=all with
	// min.insync.replicas=3 succeeds only if both followers replicate.
	const topic = "listened"
	cl, err := kgo.NewClient(kgo.SeedBrokers(external[0]), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("listeners"),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	created, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, topic)
	require.NoError(t, err)
	require.NoError(t, created[topic].Err)
	var values []string
	for i := range 50 {
		values = append(values, fmt.Sprintf("v%02d", i))
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(values[i])}).FirstErr())
	}
	var got []string
	for len(got) < len(values) {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", len(got), len(values))
		fetches.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fetches.Records() {
			got = append(got, string(r.Value))
		}
	}
	require.Equal(t, values, got)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "listeners"
	resp, err := fc.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, external[resp.NodeID], net.JoinHostPort(resp.Host, strconv.Itoa(int(resp.Port))), "the coordinator's EXTERNAL address")

	// Replication went over INTERNAL: every fetcher a broker started was
	// for a leader's INTERNAL address.
	fetcherAddr := regexp.MustCompile(`msg="added fetcher to broker" .*leader=(\d+) addr=(\S+)`)
	fetchers := 0
	for id := range int32(3) {
		for _, m := range fetcherAddr.FindAllStringSubmatch(c.Broker(id).Log(), -1) {
			leader, _ := strconv.Atoi(m[1])
			require.Equal(t, internal[int32(leader)], m[2], "broker %d fetches from broker %d", id, leader)
			fetchers++
		}
	}
	require.GreaterOrEqual(t, fetchers, 2, "both followers fetched")

	// A controlled shutdown asks the controller on its INTERNAL address.
	controller := waitController(t, zk, func(int32) bool { return true })
	other := int32((controller + 1) % 3)
	c.Broker(other).Stop(60 * time.Second)
	require.Contains(t, c.Broker(other).Log(), "controlled shutdown succeeded")
}
