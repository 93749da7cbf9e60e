package kafkazk_test

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// connectTo opens a kafkazk session with a zookeeper.connect suffix
// ("/chroot", or "" for none), closed at cleanup.
func connectTo(t *testing.T, ens *zktest.Ensemble, chroot string) *kafkazk.Client {
	t.Helper()
	c, err := kafkazk.Connect(strings.Join(ens.Addrs(), ",")+chroot, kafkazk.Options{
		SessionTimeout: zktest.SessionTimeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// nextEvent waits for a watch's event.
func nextEvent(t *testing.T, ch <-chan zk.Event) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not fire")
		return zk.Event{}
	}
}

// TestClientsOnTwoChrootsOfOneEnsembleDoNotSeeEachOther: two clients whose
// zookeeper.connect names different chroots (one nested, neither existing
// yet) work on one real ZooKeeper server as two clusters would. Starting
// up creates each chroot with its parents and Kafka's paths under it;
// the same broker id registers in both; topics, the controller election
// (a multi), sequential notifications and their listings, and the watches'
// events all stay under each chroot and read with Kafka's paths, while
// the ensemble's root holds none of them.
func TestClientsOnTwoChrootsOfOneEnsembleDoNotSeeEachOther(t *testing.T) {
	ens := zktest.StartStandalone(t)
	a := connectTo(t, ens, "/clusters/a")
	b := connectTo(t, ens, "/b")
	root := connectTo(t, ens, "")
	require.Equal(t, "/clusters/a", a.Chroot())
	require.Empty(t, root.Chroot())

	require.NoError(t, a.CreateTopLevelPaths(), "the chroot and its parent are created")
	require.NoError(t, b.CreateTopLevelPaths())
	for _, p := range []string{"/clusters/a" + kafkazk.BrokerIDsPath, "/clusters/a" + kafkazk.TopicsPath, "/b" + kafkazk.DeleteTopicsPath} {
		ok, _, err := root.Conn().Exists(p)
		require.NoError(t, err)
		require.True(t, ok, "%s exists on the ensemble", p)
	}
	ok, _, err := root.Conn().Exists(kafkazk.BrokerIDsPath)
	require.NoError(t, err)
	require.False(t, ok, "nothing at the ensemble's root")

	// The same broker id in both clusters.
	for _, c := range []*kafkazk.Client{a, b} {
		_, err := c.RegisterBroker(kafkazk.BrokerInfo{ID: 1, Endpoints: []kafkazk.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092, SecurityProtocol: "PLAINTEXT"}}})
		require.NoError(t, err, "broker 1 registers under %s", c.Chroot())
	}
	brokers, err := a.Brokers()
	require.NoError(t, err)
	require.Len(t, brokers, 1)

	// A topic of a's, seen through a's watch with a's path.
	names, topicsChanged, err := a.TopicsW()
	require.NoError(t, err)
	require.Empty(t, names)
	require.NoError(t, a.CreateTopic("orders", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {1}}}, map[string]string{"retention.ms": "1000"}))
	ev := nextEvent(t, topicsChanged)
	require.Equal(t, zk.EventNodeChildrenChanged, ev.Type)
	require.Equal(t, kafkazk.TopicsPath, ev.Path, "the event's path is the chroot's")
	topics, err := b.Topics()
	require.NoError(t, err)
	require.Empty(t, topics, "b does not see a's topic")
	config, err := a.TopicConfig("orders")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"retention.ms": "1000"}, config)

	// The controller election is a multi: each cluster elects its own.
	_, _, elected, err := a.ControllerW()
	require.NoError(t, err)
	epochA, err := a.ElectController(1, time.Now())
	require.NoError(t, err)
	epochB, err := b.ElectController(1, time.Now())
	require.NoError(t, err, "b's election does not meet a's /controller")
	require.Equal(t, int32(1), epochA.Epoch)
	require.Equal(t, int32(1), epochB.Epoch)
	require.Equal(t, kafkazk.ControllerPath, nextEvent(t, elected).Path)
	data, _, err := root.Conn().Get("/clusters/a" + kafkazk.ControllerPath)
	require.NoError(t, err)
	require.Contains(t, string(data), `"brokerid":1`)

	// Sequential znodes: named, listed and consumed with relative paths,
	// through a fenced multi.
	tp := commitlog.TopicPartition{Topic: "orders", Partition: 0}
	require.NoError(t, a.NotifyIsrChange([]commitlog.TopicPartition{tp}))
	pending, _, err := a.IsrChangeNotificationsW()
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.True(t, strings.HasPrefix(pending[0], "isr_change_"), pending[0])
	got, err := a.ConsumeIsrChanges(epochA, pending)
	require.NoError(t, err)
	require.Equal(t, []commitlog.TopicPartition{tp}, got)
	left, _, err := root.Conn().Children("/clusters/a" + kafkazk.IsrChangeNotificationPath)
	require.NoError(t, err)
	require.Empty(t, left)

	// A broker id generated on a chroot nobody prepared creates it.
	fresh := connectTo(t, ens, "/fresh")
	seq, err := fresh.GenerateBrokerSequenceID()
	require.NoError(t, err)
	require.Equal(t, int32(1), seq)
	ok, _, err = root.Conn().Exists("/fresh" + kafkazk.SeqIDPath)
	require.NoError(t, err)
	require.True(t, ok)
}

// syncBuffer is a log destination tests read while the client writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAWriteOverJuteMaxBufferIsRefusedBeforeItIsSent: a real ZooKeeper
// server takes a request of exactly jute.maxbuffer bytes as kafkazk
// measures it (and closes the connection for one byte more, which is how
// a broker asked for 100,000 partitions lost its connection); kafkazk
// refuses that one byte more with ErrRequestTooLarge without sending it.
// A topic of 100,000 partitions is refused the same way, by
// CheckTopicAssignment and by CreateTopic, two billion partitions by
// CheckPartitionCount before any is assigned, and the session's
// connection never drops: a smaller topic is created on it afterwards.
func TestAWriteOverJuteMaxBufferIsRefusedBeforeItIsSent(t *testing.T) {
	ens := zktest.StartStandalone(t)
	var log syncBuffer
	c, err := kafkazk.Connect(strings.Join(ens.Addrs(), ",")+"/sized", kafkazk.Options{
		SessionTimeout: zktest.SessionTimeout, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.CreateTopLevelPaths())
	session := c.SessionID()

	// A SetData request: its 8-byte header, the path and the data (each
	// after a 4-byte length) and the version.
	p := kafkazk.ConfigTopicPath("big")
	require.NoError(t, c.SetTopicConfig("big", nil))
	fits := kafkazk.JuteMaxBuffer - 8 - (4 + len(c.Chroot()+p)) - 4 - 4
	_, err = c.Conn().Set(c.Chroot()+p, bytes.Repeat([]byte("x"), fits), -1)
	require.NoError(t, err, "the largest request, sent by go-zookeeper itself, is taken")
	require.NoError(t, kafkazk.SetThroughChroot(c, p, bytes.Repeat([]byte("x"), fits)))
	err = kafkazk.SetThroughChroot(c, p, bytes.Repeat([]byte("x"), fits+1))
	require.ErrorIs(t, err, kafkazk.ErrRequestTooLarge, "one byte more is not sent")

	big := kafkazk.TopicAssignment{Replicas: map[int32][]int32{}}
	for p := range int32(100_000) {
		big.Replicas[p] = []int32{p % 3}
	}
	err = c.CheckTopicAssignment("huge", big)
	require.ErrorIs(t, err, kafkazk.ErrRequestTooLarge)
	require.ErrorContains(t, err, "100000 partitions")
	require.ErrorIs(t, c.CreateTopic("huge", big, nil), kafkazk.ErrRequestTooLarge)
	require.NoError(t, kafkazk.CheckPartitionCount(100_000, 1), "the cheap bound leaves 100,000 partitions to the exact check")
	require.ErrorIs(t, kafkazk.CheckPartitionCount(1<<31-1, 1), kafkazk.ErrRequestTooLarge, "two billion are refused before being assigned")

	require.NoError(t, c.CreateTopic("small", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {1}}}, nil))
	exists, err := c.TopicExists("huge")
	require.NoError(t, err)
	require.False(t, exists)
	require.Equal(t, session, c.SessionID())
	require.NotContains(t, log.String(), "StateDisconnected", "the connection never dropped")
}
