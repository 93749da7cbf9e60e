package kafkazk_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// connect opens a kafkazk session on the server, closed at cleanup, and
// creates Kafka's persistent paths as a starting broker does.
func connect(t *testing.T, ens *zktest.Ensemble) *kafkazk.Client {
	t.Helper()
	c, err := kafkazk.Connect(strings.Join(ens.Addrs(), ","), kafkazk.Options{
		SessionTimeout: zktest.SessionTimeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.CreateTopLevelPaths())
	return c
}

// TestZooKeeperLayout runs the operations of Kafka's KafkaZkClient against
// one real ZooKeeper server, each subtest on its own znodes.
func TestZooKeeperLayout(t *testing.T) {
	ens := zktest.StartStandalone(t)

	t.Run("the controller election has one winner and the epoch grows", func(t *testing.T) {
		clients := []*kafkazk.Client{connect(t, ens), connect(t, ens), connect(t, ens)}
		won := make([]kafkazk.ControllerEpoch, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() { won[i], errs[i] = c.ElectController(int32(i), time.Now()) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "two winners")
				winner = i
				continue
			}
			require.ErrorIs(t, err, kafkazk.ErrControllerExists)
		}
		require.NotEqual(t, -1, winner, "no winner")
		require.Equal(t, int32(1), won[winner].Epoch, "the first controller's epoch is 1")
		data, stat, err := clients[0].Conn().Get(kafkazk.ControllerEpochPath)
		require.NoError(t, err)
		require.Equal(t, golden(t, "controller_epoch.txt"), string(data), "Kafka's /controller_epoch after the first election")
		require.Equal(t, int32(1), stat.Version, "created at 0, then set to 1 by the election's multi")
		for _, c := range clients {
			id, ok, err := c.ControllerID()
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, int32(winner), id, "every broker agrees")
		}

		// The winner's session ends: /controller goes, a watcher hears it,
		// and the next election's epoch is 2.
		watcher := clients[(winner+1)%3]
		_, _, changed, err := watcher.ControllerW()
		require.NoError(t, err)
		clients[winner].Close()
		select {
		case ev := <-changed:
			require.Equal(t, zk.EventNodeDeleted, ev.Type)
		case <-time.After(10 * time.Second):
			t.Fatal("the watch did not fire when the controller's session closed")
		}
		next, err := watcher.ElectController(int32((winner+1)%3), time.Now())
		require.NoError(t, err)
		require.Equal(t, int32(2), next.Epoch)
		require.Greater(t, next.ZkVersion, won[winner].ZkVersion)
		require.NoError(t, watcher.ResignController())
	})

	t.Run("a zombie controller's writes are fenced", func(t *testing.T) {
		old, cur := connect(t, ens), connect(t, ens)
		oldEpoch, err := old.ElectController(1, time.Now())
		require.NoError(t, err)
		tp := commitlog.TopicPartition{Topic: "fenced", Partition: 0}
		require.NoError(t, old.CreateTopic(tp.Topic, kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {1, 2}, 1: {1, 2}}}, nil))
		require.NoError(t, old.CreatePartitionStates(oldEpoch, map[commitlog.TopicPartition]isr.PartitionState{
			tp: {Leader: 1, LeaderEpoch: 0, ControllerEpoch: oldEpoch.Epoch, ISR: []int32{1, 2}}}))

		// The old controller lost its office (here it resigns; in the
		// controller's own test its session expires) and another won.
		require.NoError(t, old.ResignController())
		newEpoch, err := cur.ElectController(2, time.Now())
		require.NoError(t, err)
		require.Equal(t, oldEpoch.Epoch+1, newEpoch.Epoch)

		s, v, err := old.PartitionState(tp)
		require.NoError(t, err)
		s.Leader = 2
		_, _, err = old.UpdatePartitionStates(oldEpoch, map[commitlog.TopicPartition]kafkazk.VersionedState{tp: {PartitionState: s, ZkVersion: v}})
		require.ErrorIs(t, err, kafkazk.ErrControllerMoved, "the zombie's write fails the epoch check")
		err = old.CreatePartitionStates(oldEpoch, map[commitlog.TopicPartition]isr.PartitionState{
			{Topic: "fenced", Partition: 1}: {Leader: 1}})
		require.ErrorIs(t, err, kafkazk.ErrControllerMoved)
		got, gotVersion, err := cur.PartitionState(tp)
		require.NoError(t, err)
		require.Equal(t, int32(1), got.Leader, "nothing written")
		require.Equal(t, v, gotVersion)

		written, failed, err := cur.UpdatePartitionStates(newEpoch, map[commitlog.TopicPartition]kafkazk.VersionedState{tp: {PartitionState: s, ZkVersion: v}})
		require.NoError(t, err, "the new controller writes")
		require.Empty(t, failed)
		require.Equal(t, v+1, written[tp])
		require.NoError(t, cur.ResignController())
	})

	t.Run("a broker's epoch is its registration's creation zxid", func(t *testing.T) {
		c := connect(t, ens)
		info := kafkazk.BrokerInfo{ID: 7, JmxPort: -1, Timestamp: time.Now(), Endpoints: []kafkazk.Endpoint{
			{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 19092}}}
		epoch, err := c.RegisterBroker(info)
		require.NoError(t, err)
		_, stat, err := c.Conn().Get(kafkazk.BrokerPath(7))
		require.NoError(t, err)
		require.Equal(t, stat.Czxid, epoch)
		require.Equal(t, c.SessionID(), stat.EphemeralOwner, "ephemeral, owned by the session")
		again, err := c.RegisterBroker(info)
		require.NoError(t, err, "registering again in the same session keeps the registration")
		require.Equal(t, epoch, again)

		other := connect(t, ens)
		_, err = other.RegisterBroker(info)
		require.ErrorIs(t, err, kafkazk.ErrBrokerIDTaken, "a second broker with the same id")

		brokers, err := other.Brokers()
		require.NoError(t, err)
		require.Len(t, brokers, 1)
		require.Equal(t, info.Endpoints, brokers[0].Endpoints)
		require.Equal(t, epoch, brokers[0].Epoch)

		c.Close() // the broker's session ends: its registration goes at once
		require.Eventually(t, func() bool {
			epoch2, err := other.RegisterBroker(info)
			return err == nil && epoch2 > epoch
		}, 10*time.Second, 20*time.Millisecond, "re-registered in a new session, at a newer epoch")
	})

	t.Run("a leader's ISR writes are conditional and notified", func(t *testing.T) {
		ctl, leader := connect(t, ens), connect(t, ens)
		e, err := ctl.ElectController(0, time.Now())
		require.NoError(t, err)
		defer ctl.ResignController()
		tp := commitlog.TopicPartition{Topic: "isr", Partition: 3}
		require.NoError(t, ctl.CreateTopic(tp.Topic, kafkazk.TopicAssignment{Replicas: map[int32][]int32{3: {0, 1, 2}, 4: {1, 2, 0}}}, nil))
		require.NoError(t, ctl.CreatePartitionStates(e, map[commitlog.TopicPartition]isr.PartitionState{
			tp: {Leader: 0, ControllerEpoch: e.Epoch, ISR: []int32{0, 1, 2}}}))
		data, _, err := leader.Conn().Get(kafkazk.PartitionStatePath(tp))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf(`{"controller_epoch":%d,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1,2]}`, e.Epoch), string(data))

		var store isr.StateStore = leader
		s, v, err := store.PartitionState(tp)
		require.NoError(t, err)
		require.Zero(t, v)
		s.ISR = []int32{0, 1}
		v1, err := store.UpdatePartitionState(tp, s, v)
		require.NoError(t, err)
		require.Equal(t, v+1, v1)
		_, err = store.UpdatePartitionState(tp, s, v)
		require.ErrorIs(t, err, isr.ErrBadVersion, "a write from a stale version is refused")
		_, _, err = store.PartitionState(commitlog.TopicPartition{Topic: "isr", Partition: 99})
		require.ErrorIs(t, err, isr.ErrNoNode)

		// The controller writes two states in one batch; one of them is
		// stale (the leader wrote since): the other is written, the stale
		// one reported.
		tp4 := commitlog.TopicPartition{Topic: "isr", Partition: 4}
		require.NoError(t, ctl.CreatePartitionStates(e, map[commitlog.TopicPartition]isr.PartitionState{
			tp4: {Leader: 1, ControllerEpoch: e.Epoch, ISR: []int32{1, 2, 0}}}))
		written, failed, err := ctl.UpdatePartitionStates(e, map[commitlog.TopicPartition]kafkazk.VersionedState{
			tp:  {PartitionState: isr.PartitionState{Leader: 1, ISR: []int32{1}}, ZkVersion: v},
			tp4: {PartitionState: isr.PartitionState{Leader: 2, ISR: []int32{2}}, ZkVersion: 0}})
		require.NoError(t, err)
		require.Equal(t, map[commitlog.TopicPartition]int32{tp4: 1}, written)
		require.ErrorIs(t, failed[tp], zk.ErrBadVersion)
		s4, _, err := store.PartitionState(tp4)
		require.NoError(t, err)
		require.Equal(t, int32(2), s4.Leader)

		require.NoError(t, store.NotifyIsrChange([]commitlog.TopicPartition{tp}))
		require.NoError(t, store.NotifyIsrChange([]commitlog.TopicPartition{tp, {Topic: "isr", Partition: 4}}))
		names, _, err := ctl.IsrChangeNotificationsW()
		require.NoError(t, err)
		require.Len(t, names, 2)
		require.Regexp(t, `^isr_change_\d{10}$`, names[0])
		tps, err := ctl.ConsumeIsrChanges(e, names)
		require.NoError(t, err)
		require.Equal(t, []commitlog.TopicPartition{tp, {Topic: "isr", Partition: 4}}, tps, "each partition once")
		names, _, err = ctl.IsrChangeNotificationsW()
		require.NoError(t, err)
		require.Empty(t, names, "consumed")
	})

	t.Run("producer id blocks are claimed in ZooKeeper", func(t *testing.T) {
		var mu sync.Mutex
		seen := map[int64]bool{}
		var wg sync.WaitGroup
		for b := range 3 {
			c := connect(t, ens)
			wg.Go(func() {
				a := producer.NewAllocator(int32(b), c.ProducerIDBlock())
				for range 1500 {
					id, err := a.Next()
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if seen[id] {
						t.Errorf("id %d handed out twice", id)
					}
					seen[id] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, seen, 4500)
		c := connect(t, ens)
		data, _, err := c.Conn().Get(kafkazk.ProducerIDBlockPath)
		require.NoError(t, err)
		require.Regexp(t, `^\{"version":1,"broker":\d,"block_start":"5000","block_end":"5999"\}$`, string(data),
			"six blocks claimed, two by each broker")
	})

	t.Run("dynamic broker configs are written per broker and cluster-wide, each with a notification", func(t *testing.T) {
		c := connect(t, ens)
		cfg, err := c.BrokerConfig("7")
		require.NoError(t, err)
		require.Empty(t, cfg, "no znode: no dynamic config")
		for _, b := range []string{"7", kafkazk.ConfigBrokerDefault} {
			require.NoError(t, c.SetBrokerConfig(b, map[string]string{"log.retention.ms": "1000"}))
			raw, _, err := c.Conn().Get(kafkazk.ConfigBrokerPath(b))
			require.NoError(t, err)
			require.Equal(t, `{"version":1,"config":{"log.retention.ms":"1000"}}`, string(raw))
			changes, _, err := c.ConfigChangesW()
			require.NoError(t, err)
			entity, err := c.ConfigChange(changes[len(changes)-1])
			require.NoError(t, err)
			require.Equal(t, "brokers/"+b, entity)
			cfg, err := c.BrokerConfig(b)
			require.NoError(t, err)
			require.Equal(t, map[string]string{"log.retention.ms": "1000"}, cfg)
		}
	})

	t.Run("a topic is created, configured and deleted", func(t *testing.T) {
		c := connect(t, ens)
		a := kafkazk.TopicAssignment{ID: kafkazk.TopicID{1, 2, 3}, Replicas: map[int32][]int32{0: {0, 1, 2}, 1: {1, 2, 0}}}
		require.NoError(t, c.CreateTopic("orders", a, map[string]string{"min.insync.replicas": "2"}))
		require.ErrorIs(t, c.CreateTopic("orders", a, nil), kafkazk.ErrTopicExists)
		got, err := c.TopicAssignments("orders", "missing")
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, a.ID, got["orders"].ID)
		require.Equal(t, a.Replicas, got["orders"].Replicas)
		cfg, err := c.TopicConfig("orders")
		require.NoError(t, err)
		raw, _, err := c.Conn().Get(kafkazk.ConfigTopicPath("orders"))
		require.NoError(t, err)
		require.Equal(t, `{"version":1,"config":{"min.insync.replicas":"2"}}`, string(raw))
		require.Equal(t, map[string]string{"min.insync.replicas": "2"}, cfg)

		require.NoError(t, c.SetTopicConfig("orders", map[string]string{"min.insync.replicas": "1"}))
		changes, _, err := c.ConfigChangesW()
		require.NoError(t, err)
		require.NotEmpty(t, changes)
		data, _, err := c.Conn().Get(kafkazk.ConfigChangesPath + "/" + changes[len(changes)-1])
		require.NoError(t, err)
		require.Equal(t, `{"version":2,"entity_path":"topics/orders"}`, string(data))
		entity, err := c.ConfigChange(changes[len(changes)-1])
		require.NoError(t, err)
		require.Equal(t, "topics/orders", entity, "what every broker's config watcher reads")
		_, err = c.ConfigChange("config_change_9999999999")
		require.ErrorIs(t, err, zk.ErrNoNode)

		e, err := c.ElectController(0, time.Now())
		require.NoError(t, err)
		defer c.ResignController()
		require.NoError(t, c.CreatePartitionStates(e, map[commitlog.TopicPartition]isr.PartitionState{
			{Topic: "orders", Partition: 0}: {Leader: 0, ISR: []int32{0}}, {Topic: "orders", Partition: 1}: {Leader: 1, ISR: []int32{1}}}))
		require.NoError(t, c.MarkTopicForDeletion("orders"))
		marked, _, err := c.TopicsToDeleteW()
		require.NoError(t, err)
		require.Equal(t, []string{"orders"}, marked)
		require.NoError(t, c.DeleteTopicZNodes(e, "orders"))
		for _, p := range []string{kafkazk.TopicPath("orders"), kafkazk.ConfigTopicPath("orders"), kafkazk.DeleteTopicPath("orders")} {
			exists, _, err := c.Conn().Exists(p)
			require.NoError(t, err)
			require.False(t, exists, "%s is gone", p)
		}
	})

	t.Run("a user's config is written and every listener hears of it", func(t *testing.T) {
		c := connect(t, ens)
		heard := make(chan string, 10)
		l, err := c.ListenConfigChanges(func(entity string) error { heard <- entity; return nil })
		require.NoError(t, err)
		defer l.Stop()

		cred := map[string]string{"SCRAM-SHA-256": "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"}
		require.NoError(t, c.SetUserConfig("alice smith*", cred))
		raw, _, err := c.Conn().Get(kafkazk.ConfigUsersPath + "/alice%20smith%2A")
		require.NoError(t, err, "the user's znode name is sanitized as Kafka's Sanitizer does")
		require.Equal(t, `{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"}}`, string(raw))
		got, err := c.UserConfig("alice smith*")
		require.NoError(t, err)
		require.Equal(t, cred, got)
		users, err := c.Users()
		require.NoError(t, err)
		require.Contains(t, users, "alice smith*")
		select {
		case entity := <-heard:
			require.Equal(t, "users/alice%20smith%2A", entity)
		case <-time.After(10 * time.Second):
			t.Fatal("the listener did not hear of the user's change")
		}
		require.NoError(t, c.SetTopicConfig("payments", map[string]string{"retention.ms": "1"}))
		select {
		case entity := <-heard:
			require.Equal(t, "topics/payments", entity, "each notification once, in order")
		case <-time.After(10 * time.Second):
			t.Fatal("the listener did not hear of the next change: its watch was not set again")
		}
	})

	t.Run("a notification the callback could not apply is tried again, not skipped", func(t *testing.T) {
		c := connect(t, ens)
		heard := make(chan string, 10)
		failures := 2
		l, err := c.ListenConfigChanges(func(entity string) error {
			if failures > 0 { // ZooKeeper unreachable, say: the entity could not be read
				failures--
				return errors.New("cannot read the entity")
			}
			heard <- entity
			return nil
		})
		require.NoError(t, err)
		defer l.Stop()
		require.NoError(t, c.SetTopicConfig("retried", map[string]string{"retention.ms": "1"}))
		require.NoError(t, c.SetTopicConfig("after", map[string]string{"retention.ms": "2"}))
		for _, want := range []string{"topics/retried", "topics/after"} {
			select {
			case entity := <-heard:
				require.Equal(t, want, entity, "in order, the failed one first")
			case <-time.After(15 * time.Second):
				t.Fatalf("never heard %s", want)
			}
		}
	})

	t.Run("processed notifications expire and are deleted", func(t *testing.T) {
		c := connect(t, ens)
		heard := make(chan string, 10)
		l, err := c.ListenConfigChanges(func(entity string) error { heard <- entity; return nil })
		require.NoError(t, err)
		defer l.Stop()
		kafkazk.ExpireConfigChangesAfter(l, 0) // a notification expires once processed
		require.NoError(t, c.SetTopicConfig("expiring", map[string]string{"retention.ms": "1"}))
		require.Equal(t, "topics/expiring", <-heard)
		require.NoError(t, c.SetTopicConfig("expiring", map[string]string{"retention.ms": "2"}))
		require.Equal(t, "topics/expiring", <-heard)
		require.Eventually(t, func() bool {
			names, _, err := c.Conn().Children(kafkazk.ConfigChangesPath)
			require.NoError(t, err)
			return len(names) == 0
		}, 10*time.Second, 50*time.Millisecond, "the expired notifications were deleted")
	})

	t.Run("every broker reads the same cluster id", func(t *testing.T) {
		ids := make([]string, 3)
		var wg sync.WaitGroup
		for i := range ids {
			c := connect(t, ens)
			wg.Go(func() {
				var err error
				ids[i], err = c.ClusterID()
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		require.Len(t, ids[0], 22)
		require.Equal(t, ids[0], ids[1])
		require.Equal(t, ids[0], ids[2])
	})

	t.Run("a fresh broker creates Kafka's persistent paths", func(t *testing.T) {
		c := connect(t, ens)
		for _, p := range kafkazk.PersistentPaths {
			exists, _, err := c.Conn().Exists(p)
			require.NoError(t, err)
			require.True(t, exists, p)
		}
	})

	t.Run("broker sequence ids are distinct and count up from 1", func(t *testing.T) {
		clients := []*kafkazk.Client{connect(t, ens), connect(t, ens), connect(t, ens)}
		first, err := clients[0].GenerateBrokerSequenceID()
		require.NoError(t, err)
		require.GreaterOrEqual(t, first, int32(1), "the first write of /brokers/seqid makes version 1")
		ids := make([][]int32, len(clients))
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() {
				for range 10 {
					id, err := c.GenerateBrokerSequenceID()
					if err != nil {
						t.Error(err)
						return
					}
					ids[i] = append(ids[i], id)
				}
			})
		}
		wg.Wait()
		seen := map[int32]bool{}
		for _, l := range ids {
			for _, id := range l {
				require.False(t, seen[id], "id %d given twice", id)
				seen[id] = true
			}
		}
		for id := first + 1; id <= first+30; id++ {
			require.True(t, seen[id], "id %d was skipped: the version counts every write", id)
		}
	})
}
