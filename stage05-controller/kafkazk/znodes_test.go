package kafkazk_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// golden reads a file of testdata/: the bytes Kafka 2.8 writes into one
// znode (testdata/README.md gives the source of each).
func golden(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(data)
}

// TestEveryZnodeIsWrittenAsKafkaWritesIt holds each encoder's output
// against Kafka's bytes, key order included, so that `zookeeper-shell get`
// on this workbook's cluster reads like a Kafka 2.8 cluster's.
func TestEveryZnodeIsWrittenAsKafkaWritesIt(t *testing.T) {
	ts := time.UnixMilli(1700000000000)
	plain := kafkazk.Endpoint{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "broker0.example", Port: 9092}
	ssl := kafkazk.Endpoint{Listener: "SSL", SecurityProtocol: "SSL", Host: "broker0.example", Port: 9093}
	topicID, err := kafkazk.ParseTopicID("fRqML0s-T2CaW_48IdTn-A")
	require.NoError(t, err)
	rotate := func(n int) map[int32][]int32 {
		m := map[int32][]int32{}
		for p := range n {
			m[int32(p)] = [][]int32{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}}[p%3]
		}
		return m
	}
	for _, tt := range []struct {
		file string
		got  []byte
	}{
		{"broker_v5.json", kafkazk.BrokerInfo{ID: 0, Endpoints: []kafkazk.Endpoint{plain}, JmxPort: -1, Timestamp: ts}.Encode()},
		{"broker_v5_rack.json", kafkazk.BrokerInfo{ID: 0, Endpoints: []kafkazk.Endpoint{plain}, Rack: "rack-a", JmxPort: -1, Timestamp: ts}.Encode()},
		{"broker_v5_two_listeners.json", kafkazk.BrokerInfo{ID: 0, Endpoints: []kafkazk.Endpoint{plain, ssl}, JmxPort: -1, Timestamp: ts}.Encode()},
		{"broker_v5_named_listeners.json", kafkazk.BrokerInfo{ID: 0, JmxPort: -1, Timestamp: ts, Endpoints: []kafkazk.Endpoint{
			{Listener: "INTERNAL", SecurityProtocol: "PLAINTEXT", Host: "broker0.example", Port: 9092},
			{Listener: "EXTERNAL", SecurityProtocol: "SSL", Host: "broker0.example", Port: 9093}}}.Encode()},
		{"broker_v5_ssl_only.json", kafkazk.BrokerInfo{ID: 0, Endpoints: []kafkazk.Endpoint{ssl}, JmxPort: -1, Timestamp: ts}.Encode()},
		{"topic_v3.json", kafkazk.TopicAssignment{ID: topicID, Replicas: rotate(3)}.Encode()},
		{"topic_v3_12_partitions.json", kafkazk.TopicAssignment{ID: topicID, Replicas: rotate(12)}.Encode()},
		{"partition_state.json", isr.PartitionState{ControllerEpoch: 1, Leader: 0, LeaderEpoch: 0, ISR: []int32{0, 1, 2}}.Encode()},
		{"controller.json", kafkazk.ControllerInfo{BrokerID: 0, Timestamp: ts}.Encode()},
		{"controller_epoch_initial.txt", kafkazk.EncodeControllerEpoch(0)},
		{"controller_epoch.txt", kafkazk.EncodeControllerEpoch(1)},
		{"isr_change.json", isr.EncodeIsrChange([]commitlog.TopicPartition{{Topic: "orders", Partition: 0}})},
		{"reassign_partitions.json", kafkazk.EncodeReassignments([]kafkazk.Reassignment{{Topic: "orders", Partition: 0, Replicas: []int32{2, 0, 1}}})},
		{"config_topic.json", kafkazk.EncodeTopicConfig(map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"})},
		{"config_topic_empty.json", kafkazk.EncodeTopicConfig(nil)},
		{"config_change.json", kafkazk.EncodeConfigChange("topics/orders")},
		{"cluster_id.json", kafkazk.EncodeClusterID("Dz5dfJsaTi2Ma0ovHg08Ww")},
		{"producer_id_block.json", must(json.Marshal(producer.Block{Version: 1, Broker: 0, Start: 0, End: 999}))},
	} {
		t.Run(tt.file, func(t *testing.T) { require.Equal(t, golden(t, tt.file), string(tt.got)) })
	}
}

// TestEncodingsReadBack: what an encoder writes, the decoder reads.
func TestEncodingsReadBack(t *testing.T) {
	b := kafkazk.BrokerInfo{ID: 3, Rack: "r", JmxPort: -1, Timestamp: time.UnixMilli(1700000000000), Endpoints: []kafkazk.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 19092}}}
	got, err := kafkazk.DecodeBrokerInfo(3, b.Encode())
	require.NoError(t, err)
	require.Equal(t, b.Endpoints, got.Endpoints)
	require.Equal(t, b.Rack, got.Rack)
	require.True(t, b.Timestamp.Equal(got.Timestamp))

	a := kafkazk.TopicAssignment{ID: kafkazk.TopicID{9}, Replicas: map[int32][]int32{0: {1, 2}, 13: {2, 1}}, Adding: map[int32][]int32{}, Removing: map[int32][]int32{}}
	ga, err := kafkazk.DecodeTopicAssignment("t", a.Encode())
	require.NoError(t, err)
	require.Equal(t, a, ga)

	c, err := kafkazk.DecodeControllerInfo(kafkazk.ControllerInfo{BrokerID: 2, Timestamp: time.UnixMilli(5)}.Encode())
	require.NoError(t, err)
	require.Equal(t, int32(2), c.BrokerID)
	_, err = kafkazk.DecodeControllerInfo([]byte(`{"version":1}`))
	require.Error(t, err, "no brokerid")

	id, err := kafkazk.DecodeClusterID(kafkazk.EncodeClusterID("abc"))
	require.NoError(t, err)
	require.Equal(t, "abc", id)
	_, err = kafkazk.ParseTopicID("short")
	require.Error(t, err)
	servers, chroot, err := kafkazk.ParseConnect(" zk1:2181, zk2:2181 ")
	require.NoError(t, err)
	require.Equal(t, []string{"zk1:2181", "zk2:2181"}, servers)
	require.Empty(t, chroot)
}

// TestZookeeperConnectNamesAChrootForEveryServer: what follows the first
// "/" of zookeeper.connect is the chroot of every server, as Kafka and
// ZooKeeper read it; "/" alone is none; a path ZooKeeper would refuse is
// refused here, naming the string.
func TestZookeeperConnectNamesAChrootForEveryServer(t *testing.T) {
	for _, tt := range []struct {
		connect string
		servers []string
		chroot  string
	}{
		{"zk1:2181/kafka", []string{"zk1:2181"}, "/kafka"},
		{"zk1:2181,zk2:2181,zk3:2181/clusters/orders", []string{"zk1:2181", "zk2:2181", "zk3:2181"}, "/clusters/orders"},
		{"zk1:2181/", []string{"zk1:2181"}, ""},
	} {
		servers, chroot, err := kafkazk.ParseConnect(tt.connect)
		require.NoError(t, err, tt.connect)
		require.Equal(t, tt.servers, servers, tt.connect)
		require.Equal(t, tt.chroot, chroot, tt.connect)
	}
	for _, bad := range []string{"zk1:2181/kafka/", "zk1:2181//kafka", "zk1:2181/a/../b", "zk1:2181/./a", "/kafka"} {
		_, _, err := kafkazk.ParseConnect(bad)
		require.ErrorContains(t, err, bad, "refused")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
