// Package demo is stage 05's demo, run as a test because its ZooKeeper
// ensemble lives in containers that package zktest starts and removes:
//
//	cd stage05-controller && go test -v -count=1 -run TestDemo ./demo
//
// It prints what a reader would see with zookeeper-shell next to three
// Kafka brokers: the controller election, the znodes, a kill -9 of the
// controller and what changes.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// get prints a znode as zookeeper-shell's get does.
func get(t *testing.T, zk *kafkazk.Client, path string) {
	t.Helper()
	data, stat, err := zk.Conn().Get(path)
	require.NoError(t, err)
	owner := ""
	if stat.EphemeralOwner != 0 {
		owner = fmt.Sprintf("  (ephemeral, session %#x)", stat.EphemeralOwner)
	}
	t.Logf("get %s%s\n    %s", path, owner, data)
}

func TestDemo(t *testing.T) {
	t.Log("== three ZooKeeper servers in containers, three broker processes")
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 3, nil)
	zk, err := kafkazk.Connect(strings.Join(ens.Addrs(), ","), kafkazk.Options{SessionTimeout: zktest.SessionTimeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	defer zk.Close()

	t.Log("== the controller election (seed §1.1): every broker tried to create /controller; one did")
	var controller int32
	require.Eventually(t, func() bool {
		id, ok, err := zk.ControllerID()
		controller = id
		return err == nil && ok
	}, 30*time.Second, 10*time.Millisecond)
	get(t, zk, kafkazk.ControllerPath)
	get(t, zk, kafkazk.ControllerEpochPath)
	ids, _, err := zk.Conn().Children(kafkazk.BrokerIDsPath)
	require.NoError(t, err)
	slices.Sort(ids)
	t.Logf("ls %s\n    %v", kafkazk.BrokerIDsPath, ids)
	get(t, zk, kafkazk.BrokerPath(0))

	t.Log("== a topic, created with franz-go's admin client on any broker; the controller gives every partition a leader")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, res["orders"].Err)
	states := func(alive func(int32) bool) {
		for p := range int32(3) {
			tp := commitlog.TopicPartition{Topic: "orders", Partition: p}
			require.Eventually(t, func() bool {
				s, _, err := zk.PartitionState(tp)
				return err == nil && s.Leader >= 0 && alive(s.Leader) && !slices.ContainsFunc(s.ISR, func(r int32) bool { return !alive(r) })
			}, 60*time.Second, 10*time.Millisecond)
			get(t, zk, kafkazk.PartitionStatePath(tp))
		}
	}
	get(t, zk, kafkazk.TopicPath("orders"))
	get(t, zk, kafkazk.ConfigTopicPath("orders"))
	states(func(int32) bool { return true })

	t.Logf("== kill -9 of the controller, broker %d", controller)
	killed := time.Now()
	c.Broker(controller).Kill()
	var next int32
	require.Eventually(t, func() bool {
		id, ok, err := zk.ControllerID()
		next = id
		return err == nil && ok && id != controller
	}, 60*time.Second, 10*time.Millisecond)
	t.Logf("broker %d is the controller %v later (its session expired after %v; the others' watches fired)",
		next, time.Since(killed).Round(time.Millisecond), zktest.SessionTimeout)
	get(t, zk, kafkazk.ControllerPath)
	get(t, zk, kafkazk.ControllerEpochPath)
	ids, _, err = zk.Conn().Children(kafkazk.BrokerIDsPath)
	require.NoError(t, err)
	slices.Sort(ids)
	t.Logf("ls %s\n    %v", kafkazk.BrokerIDsPath, ids)
	t.Log("every partition the dead broker led has a new leader from its ISR, at a new leader epoch, and the ISRs lost it")
	states(func(id int32) bool { return id != controller })
}
