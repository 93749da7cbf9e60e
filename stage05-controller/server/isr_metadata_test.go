package server_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// pause stops broker b's process with SIGSTOP (a long GC pause, a frozen
// VM: the process holds its sockets and its ZooKeeper session but answers
// nothing) and waits until the kernel reports it stopped. The returned
// function resumes it with SIGCONT; so does the test's cleanup, in case
// the test ends first.
func pause(t *testing.T, b *brokertest.Broker) (resume func()) {
	t.Helper()
	pid := brokerPid(b)
	require.Positive(t, pid, "broker %d's process", b.ID)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	var once sync.Once
	resume = func() { once.Do(func() { require.NoError(t, syscall.Kill(pid, syscall.SIGCONT)) }) }
	t.Cleanup(func() { once.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) })
	require.Eventually(t, func() bool { return processState(pid) == "T" }, 10*time.Second, time.Millisecond,
		"broker %d (pid %d) stopped", b.ID, pid)
	return resume
}

// processState is the state letter of /proc/<pid>/stat ("R", "S", "T"
// for stopped, ...).
func processState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, so cut at the last ')'.
	_, rest, ok := strings.Cut(string(stat[strings.LastIndexByte(string(stat), ')')+1:]), " ")
	if !ok {
		return ""
	}
	state, _, _ := strings.Cut(rest, " ")
	return state
}

// metadataISR asks the broker at addr alone for topic's metadata and
// returns partition p's ISR, sorted, as that broker's metadata cache holds
// it (stage 03's cache, fed by the controller's UpdateMetadata).
func metadataISR(addr, topic string, p int32) ([]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	// The seed itself, not any broker the client learns of.
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		for _, part := range t.Partitions {
			if part.Partition == p && part.ErrorCode == 0 {
				isr := slices.Clone(part.ISR)
				slices.Sort(isr)
				return isr, nil
			}
		}
	}
	return nil, fmt.Errorf("%s has no %s-%d", addr, topic, p)
}

// TestISRChangesReachEveryBrokersMetadata: seed §1.3's ISR, from the
// leader's decision to every broker's Metadata answer. Three broker
// processes on a three-node ensemble, a topic with replication factor 3,
// replica.lag.time.max.ms 1 s, and an acks=all producer writing all along.
// A follower that is neither the leader nor the controller is frozen
// (SIGSTOP): its leader takes it out of the ISR in ZooKeeper, the
// controller hears of it (/isr_change_notification) and sends
// UpdateMetadata, and both running brokers' Metadata show the smaller ISR
// while the producer goes on. The follower is resumed (SIGCONT) within its
// ZooKeeper session, so this is the leader's ISR change and not a broker's
// death: it catches up, its leader puts it back, and every broker's
// Metadata, its own included, shows the full ISR again.
func TestISRChangesReachEveryBrokersMetadata(t *testing.T) {
	// A session long enough that the frozen broker keeps it: its
	// registration must outlive the pause.
	const session = 10 * time.Second
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 3, map[string]string{
		"replica.lag.time.max.ms":      "1000",
		"zookeeper.session.timeout.ms": fmt.Sprint(session.Milliseconds()),
	})
	zk := observer(t, ens)
	const topic = "watched"
	tp := commitlog.TopicPartition{Topic: topic, Partition: 0}
	createTopic(t, c, topic, 1, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	all := []int32{0, 1, 2}
	isrEverywhere := func(ids []int32, want []int32) func() bool {
		return func() bool {
			for _, id := range ids {
				isr, err := metadataISR(c.Broker(id).Addr(), topic, 0)
				if err != nil || !slices.Equal(isr, want) {
					return false
				}
			}
			return true
		}
	}
	require.Eventually(t, isrEverywhere(all, all), 30*time.Second, 20*time.Millisecond, "every broker's Metadata shows the full ISR")

	prod := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(200))
	var acked atomic.Int64
	var errMu sync.Mutex
	var produceErrs []error
	stop, producing := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(producing)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			prod.Produce(context.Background(), &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					errMu.Lock()
					produceErrs = append(produceErrs, err)
					errMu.Unlock()
					return
				}
				acked.Add(1)
			})
		}
	}()
	progress := func(n int64, what string) {
		from := acked.Load()
		require.Eventually(t, func() bool { return acked.Load() >= from+n }, 30*time.Second, 5*time.Millisecond,
			"the producer goes on %s", what)
	}
	progress(500, "before the pause")

	// The follower to freeze: not the leader, and not the controller,
	// which must go on to hear of the change.
	state, _, err := zk.PartitionState(tp)
	require.NoError(t, err)
	controller, ok, err := zk.ControllerID()
	require.NoError(t, err)
	require.True(t, ok)
	i := slices.IndexFunc(all, func(id int32) bool { return id != state.Leader && id != controller })
	follower := all[i]
	var running []int32
	for _, id := range all {
		if id != follower {
			running = append(running, id)
		}
	}
	registration := func() int64 {
		brokers, err := zk.Brokers()
		require.NoError(t, err)
		j := slices.IndexFunc(brokers, func(b kafkazk.RegisteredBroker) bool { return b.ID == follower })
		require.NotEqual(t, -1, j, "broker %d is registered", follower)
		return brokers[j].Epoch
	}
	epoch := registration()

	paused := time.Now()
	resume := pause(t, c.Broker(follower))
	// Well within the session: the leader's lag check, its ZooKeeper
	// write, the controller's notification and UpdateMetadata.
	require.Eventually(t, isrEverywhere(running, running), session/2, 10*time.Millisecond,
		"brokers %v show the ISR without frozen broker %d", running, follower)
	shrunk := time.Since(paused)
	s, _, err := zk.PartitionState(tp)
	require.NoError(t, err)
	require.Equal(t, state.Leader, s.Leader, "the leader stays")
	require.NotContains(t, s.ISR, follower, "the leader's ZooKeeper write took it out")
	progress(200, "acks=all without the frozen follower")
	resume()
	resumed := time.Now()
	t.Logf("broker %d frozen (leader %d, controller %d): its ISR change in every running broker's Metadata after %v",
		follower, state.Leader, controller, shrunk.Round(time.Millisecond))
	require.Less(t, time.Since(paused), session, "resumed within its session")

	require.Eventually(t, isrEverywhere(all, all), 30*time.Second, 10*time.Millisecond,
		"broker %d caught up: every broker's Metadata shows the full ISR again", follower)
	t.Logf("broker %d resumed: back in every broker's ISR after %v", follower, time.Since(resumed).Round(time.Millisecond))
	require.Equal(t, epoch, registration(), "the same registration: the session outlived the pause, no broker died")
	progress(200, "after the resume")

	close(stop)
	<-producing
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	require.NoError(t, prod.Flush(fctx))
	errMu.Lock()
	defer errMu.Unlock()
	require.Empty(t, produceErrs)
}
