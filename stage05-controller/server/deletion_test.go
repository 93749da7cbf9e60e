package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestATopicDeletedWhileABrokerIsDownIsGoneOnceItStarts: Kafka's topic
// deletion waits for every replica (TopicDeletionManager). Three broker
// processes; one that is not the controller is stopped, and kadm deletes a
// topic with a replica of every partition on each broker. DeleteTopics
// answers at once (every running broker drops the topic from its
// metadata), the running brokers delete their logs, but the topic's
// znodes stay while the stopped broker's replicas are not deleted. When it
// starts again, it is told to delete them: its logs go, and so does the
// topic. Before, it was sent StopReplica on start but its answer was not
// listened to, and the topic stayed marked for deletion for ever.
func TestATopicDeletedWhileABrokerIsDownIsGoneOnceItStarts(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, nil)
	zk := observer(t, ens)
	createTopic(t, c, "doomed", 3, nil)
	waitLeaders(t, zk, "doomed", 3, func(int32) bool { return true })
	roundTrip(t, c, "doomed", 3, "before", 5)
	ctl := waitController(t, zk, func(int32) bool { return true })
	down := (ctl + 1) % 3
	for id := range int32(3) {
		require.NotEmpty(t, logDirs(c, id, "doomed"), "broker %d holds replicas", id)
	}

	c.Broker(down).Stop(30 * time.Second)
	require.Eventually(t, func() bool {
		brokers, err := zk.Brokers()
		return err == nil && len(brokers) == 2
	}, 30*time.Second, 10*time.Millisecond, "broker %d is gone from ZooKeeper", down)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deleted, err := kadm.NewClient(client(t, c)).DeleteTopics(ctx, "doomed")
	require.NoError(t, err)
	require.NoError(t, deleted["doomed"].Err, "DeleteTopics answers while a replica waits")
	require.Eventually(t, func() bool {
		for id := range int32(3) {
			if id != down && len(logDirs(c, id, "doomed")) > 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the running brokers' logs are deleted")
	exists, err := zk.TopicExists("doomed")
	require.NoError(t, err)
	require.True(t, exists, "the topic waits for broker %d's replicas", down)
	require.NotEmpty(t, logDirs(c, down, "doomed"), "which it still has")

	c.Broker(down).Start()
	require.Eventually(t, func() bool {
		exists, _, err := zk.Conn().Exists(kafkazk.TopicPath("doomed"))
		marked, _, err2 := zk.Conn().Exists(kafkazk.DeleteTopicPath("doomed"))
		return err == nil && err2 == nil && !exists && !marked && len(logDirs(c, down, "doomed")) == 0
	}, 30*time.Second, 20*time.Millisecond, "broker %d started: its logs are deleted and the topic is gone", down)
}

// logDirs lists a broker's log directories of topic's partitions, those
// renamed for deletion (-delete) left out.
func logDirs(c *brokertest.Cluster, id int32, topic string) []string {
	matches, _ := filepath.Glob(filepath.Join(c.Broker(id).LogDir(), topic+"-*"))
	var live []string
	for _, m := range matches {
		if !strings.HasSuffix(m, "-delete") {
			live = append(live, m)
		}
	}
	return live
}
