package producer_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	s4 "github.com/kafkaworkbook/workbook/stage04-isr-acks/cluster"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// TestIdempotentProducerAcknowledgesEveryRecordOnceAcrossBrokerRestarts:
// three stage 04 brokers, a topic of three partitions on all three
// (min.insync.replicas=2), and our idempotent producer (acks=all, five in
// flight) writing keyed records all along while, one after the other, a
// leader moves and each broker is stopped and started again. Every record
// is acknowledged, once, and read back exactly once, in the order
// produced on its partition.
func TestIdempotentProducerAcknowledgesEveryRecordOnceAcrossBrokerRestarts(t *testing.T) {
	const topic, partitions = "faults", 3
	c, err := s4.Start(3, s4.Options{Dir: t.TempDir(), Logger: testLogger(),
		Props: map[string]string{"min.insync.replicas": "2", "replica.lag.time.max.ms": "1500"}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Controller.CreateTopic(topic, partitions, 3))
	tps := make([]commitlog.TopicPartition, partitions)
	for i := range tps {
		tps[i] = commitlog.TopicPartition{Topic: topic, Partition: int32(i)}
	}
	waitISRs := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			for _, tp := range tps {
				if isr, _, err := c.ISR(tp); err != nil || len(isr) != 3 {
					return false
				}
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "every ISR whole")
	}
	waitISRs()

	p := newProducer(t, c.Addrs(), "request.timeout.ms", "3000", "delivery.timeout.ms", "60000", "linger.ms", "2",
		"batch.size", "4096")
	a := newAcks()
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &producer.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i%30)), Value: []byte(strconv.Itoa(i))}
			if err := p.Produce(ctx(t), r, a.callback); err != nil {
				t.Errorf("Produce: %v", err)
				return
			}
			sent.Add(1)
		}
	}()
	progress := func(n int, what string) {
		t.Helper()
		from := a.count()
		require.Eventually(t, func() bool { return a.count() >= from+n }, 30*time.Second, 5*time.Millisecond,
			"the producer goes on %s (%d callbacks)", what, a.count())
	}

	progress(2000, "at the start")
	s, ok := c.Controller.State(tps[0])
	require.True(t, ok)
	next := (s.Leader + 1) % 3
	t.Logf("%s's leader moves from %d to %d", tps[0], s.Leader, next)
	require.NoError(t, c.Controller.ElectLeader(tps[0], next))
	progress(2000, "after the leader moved")
	for _, victim := range []int32{0, 1, 2} {
		t.Logf("broker %d restarts", victim)
		require.NoError(t, c.StopBroker(victim))
		require.NoError(t, c.Controller.BrokerStopped(victim))
		progress(1000, fmt.Sprintf("with broker %d stopped", victim))
		require.NoError(t, c.StartBroker(victim))
		require.NoError(t, c.Controller.BrokerStarted(victim))
		waitISRs()
		progress(1000, fmt.Sprintf("after broker %d came back", victim))
	}
	close(stop)
	wg.Wait()
	require.NoError(t, p.Flush(ctx(t)))

	n := requireOnceInOrder(t, a, int(sent.Load()), readAll(t, c.Addrs(), topic), "")
	t.Logf("%d records acknowledged and read back once each, in order per partition", n)
}
