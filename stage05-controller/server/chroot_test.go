package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestBrokersOnTwoChrootsOfOneEnsembleAreTwoClusters: zookeeper.connect
// with a chroot (the sample config's host:port/chroot form, refused
// before) puts a broker's whole cluster under it. Two brokers with id 0,
// one on /clusters/a and one on /b, neither chroot existing, start on one
// ZooKeeper server: each creates its chroot, registers and elects itself
// controller there, with its own cluster id; a topic of one cluster is
// unknown to the other; records go through on both; and each applies its
// own auto.create.topics.enable (b's is false: UNKNOWN_TOPIC_OR_PARTITION,
// nothing created). Nothing is written at the ensemble's root.
func TestBrokersOnTwoChrootsOfOneEnsembleAreTwoClusters(t *testing.T) {
	ens := zktest.StartStandalone(t)
	a := brokertest.Start(t, ens, 1, map[string]string{"zookeeper.connect": strings.Join(ens.Addrs(), ",") + "/clusters/a"})
	b := brokertest.Start(t, ens, 1, map[string]string{"zookeeper.connect": strings.Join(ens.Addrs(), ",") + "/b", "auto.create.topics.enable": "false"})
	root := observer(t, ens)

	for _, chroot := range []string{"/clusters/a", "/b"} {
		for _, p := range []string{kafkazk.BrokerPath(0), kafkazk.ControllerPath, kafkazk.ClusterIDPath} {
			ok, _, err := root.Conn().Exists(chroot + p)
			require.NoError(t, err)
			require.True(t, ok, "%s%s", chroot, p)
		}
	}
	for _, p := range []string{kafkazk.BrokersPath, kafkazk.ControllerPath, kafkazk.ClusterIDPath} {
		ok, _, err := root.Conn().Exists(p)
		require.NoError(t, err)
		require.False(t, ok, "%s at the root", p)
	}
	idA, _, err := root.Conn().Get("/clusters/a" + kafkazk.ClusterIDPath)
	require.NoError(t, err)
	idB, _, err := root.Conn().Get("/b" + kafkazk.ClusterIDPath)
	require.NoError(t, err)
	require.NotEqual(t, string(idA), string(idB), "two clusters, two ids")

	createTopicRF(t, a, "only-in-a", 1)
	waitTopicEverywhere(t, a, "only-in-a", 1)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, metadataFor(t, b, -1, false, "only-in-a")["only-in-a"].ErrorCode)
	createTopicRF(t, b, "only-in-b", 1)
	waitTopicEverywhere(t, b, "only-in-b", 1)
	roundTrip(t, a, "only-in-a", 1, "a", 5)
	roundTrip(t, b, "only-in-b", 1, "b", 5)
	ok, _, err := root.Conn().Exists("/b" + kafkazk.TopicPath("only-in-b"))
	require.NoError(t, err)
	require.True(t, ok)

	require.Equal(t, kerr.UnknownTopicOrPartition.Code, metadataFor(t, b, -1, true, "nowhere")["nowhere"].ErrorCode,
		"auto.create.topics.enable=false creates nothing")
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, metadataFor(t, b, 2, false, "nowhere")["nowhere"].ErrorCode)
	ok, _, err = root.Conn().Exists("/b" + kafkazk.TopicPath("nowhere"))
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, kerr.LeaderNotAvailable.Code, metadataFor(t, a, -1, true, "nowhere")["nowhere"].ErrorCode,
		"a creates it (Kafka's default)")
	ok, _, err = root.Conn().Exists("/clusters/a" + kafkazk.TopicPath("nowhere"))
	require.NoError(t, err)
	require.True(t, ok)
}
