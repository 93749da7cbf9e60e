package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
)

// brokerCollector reads Kafka's gauges and meters from the broker at
// scrape time: nothing is counted twice, and a scrape sees the broker as
// it is.
type brokerCollector struct {
	s *s5.Server

	// mu guards the previous scrape's idle times: the idle percentages
	// are over the interval since then (since New for the first scrape).
	mu                            sync.Mutex
	lastScrape                    time.Time
	lastProcIdle, lastHandlerIdle time.Duration
}

// purgatory is what a purgatory of any key type tells.
type purgatory interface {
	Name() string
	Watched() int64
	Delayed() int64
}

// descs are the collector's descriptors, as mbean made them: Describe
// sends them all.
var descs []*prometheus.Desc

// mbean is the descriptor of a Kafka MBean: bean is its ObjectName
// (kafka.<domain>:type=<type>,name=<name>, then the keys that are labels,
// in brackets where they are optional), help what the value is. The
// Prometheus name is the JMX exporter's (promName), the help the bean and
// then help.
func mbean(bean, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(promName(bean), bean+": "+help, labels, nil)
	descs = append(descs, d)
	return d
}

// promName is the name the JMX exporter's common Kafka rules give an MBean
// (see the package comment): kafka.server:type=ReplicaManager,name=IsrShrinksPerSec
// is kafka_server_replicamanager_isrshrinks_total.
func promName(bean string) string {
	domain, keys, _ := strings.Cut(bean, ":")
	var typ, name string
	for _, kv := range strings.FieldsFunc(keys, func(r rune) bool { return r == ',' || r == '[' }) {
		if v, ok := strings.CutPrefix(kv, "type="); ok {
			typ = v
		} else if v, ok := strings.CutPrefix(kv, "name="); ok {
			name = v
		}
	}
	suffix := ""
	if n, ok := strings.CutSuffix(name, "PerSec"); ok {
		name, suffix = n, "_total"
	} else if n, ok := strings.CutSuffix(name, "Percent"); ok {
		name, suffix = n, "_percent"
	}
	return strings.ToLower(strings.ReplaceAll(domain, ".", "_")+"_"+typ+"_"+name) + suffix
}

var (
	underReplicated = mbean("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
		"partitions led here whose ISR is smaller than their replicas")
	partitionCount = mbean("kafka.server:type=ReplicaManager,name=PartitionCount",
		"partitions with a replica here")
	leaderCount = mbean("kafka.server:type=ReplicaManager,name=LeaderCount",
		"partitions led here")
	isrShrinks = mbean("kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
		"ISR shrinks this broker made as a leader, one per partition")
	isrExpands = mbean("kafka.server:type=ReplicaManager,name=IsrExpandsPerSec",
		"ISR expansions this broker made as a leader, one per partition")

	activeController = mbean("kafka.controller:type=KafkaController,name=ActiveControllerCount",
		"1 on the controller, 0 elsewhere")
	offlinePartitions = mbean("kafka.controller:type=KafkaController,name=OfflinePartitionsCount",
		"partitions without a live leader (on the controller; 0 elsewhere)")
	globalPartitions = mbean("kafka.controller:type=KafkaController,name=GlobalPartitionCount",
		"the cluster's partitions (on the controller; 0 elsewhere)")

	bytesIn = mbean("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec[,topic=<topic>]",
		"bytes of the batches appended here as a leader, as produced; topic=\"\" is every topic", "topic")
	bytesOut = mbean("kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec[,topic=<topic>]",
		"record bytes fetched by consumers; topic=\"\" is every topic", "topic")
	messagesIn = mbean("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec[,topic=<topic>]",
		"records appended here as a leader; topic=\"\" is every topic", "topic")
	failedProduce = mbean("kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec",
		"produced partitions answered with an error")
	invalidCRC = mbean("kafka.server:type=BrokerTopicMetrics,name=InvalidMessageCrcRecordsPerSec",
		"batches refused for a CRC mismatch")
	invalidOffset = mbean("kafka.server:type=BrokerTopicMetrics,name=InvalidOffsetOrSequenceRecordsPerSec",
		"batches refused for inconsistent offsets or counts")

	requestQueue = mbean("kafka.network:type=RequestChannel,name=RequestQueueSize",
		"requests waiting for a handler")
	processorIdle = mbean("kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent",
		"the share of time the Processors waited for events since the previous scrape, 0 to 1")
	handlerIdle = mbean("kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent",
		"the share of time the handlers waited for a request since the previous scrape, 0 to 1")

	purgatorySize = mbean("kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=<op>",
		"operations in watch lists", "delayedOperation")
	delayedOps = mbean("kafka.server:type=DelayedOperationPurgatory,name=NumDelayedOperations,delayedOperation=<op>",
		"operations waiting for their deadline", "delayedOperation")

	brokerState = mbean("kafka.server:type=KafkaServer,name=BrokerState",
		"3 running as a broker, 7 shutting down")
)

func newBrokerCollector(s *s5.Server) *brokerCollector {
	st := s.NetworkStats()
	return &brokerCollector{s: s, lastScrape: time.Now(), lastProcIdle: st.ProcessorIdle, lastHandlerIdle: st.HandlerIdle}
}

// Describe sends every descriptor.
func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

// Collect reads the broker.
func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	s := c.s

	// ReplicaManager.
	var partitions, leaders, under int
	for _, p := range s.Replicas.Partitions() {
		partitions++
		if p.Role() != replica.Leader {
			continue
		}
		leaders++
		if replicas, isr := p.Replicas(); len(isr) < len(replicas) {
			under++
		}
	}
	gauge(partitionCount, float64(partitions))
	gauge(leaderCount, float64(leaders))
	gauge(underReplicated, float64(under))
	counter(isrShrinks, s.ISR.Shrinks())
	counter(isrExpands, s.ISR.Expands())

	// KafkaController: the counts only on the controller, as in Kafka.
	active, offline, global := 0.0, 0.0, 0.0
	if s.Controller.IsActive() {
		active = 1
		if states, ok := controllerStates(s.Controller); ok {
			global = float64(len(states))
			for _, st := range states {
				if st == controller.OfflinePartition {
					offline++
				}
			}
		}
	}
	gauge(activeController, active)
	gauge(offlinePartitions, offline)
	gauge(globalPartitions, global)

	// BrokerTopicMetrics.
	counters := s.Counters()
	counter(bytesIn, counters.All.BytesIn.Load(), "")
	counter(bytesOut, counters.All.BytesOut.Load(), "")
	counter(messagesIn, counters.All.MessagesIn.Load(), "")
	counters.Topics(func(topic string, t *broker.TopicCounters) {
		counter(bytesIn, t.BytesIn.Load(), topic)
		counter(bytesOut, t.BytesOut.Load(), topic)
		counter(messagesIn, t.MessagesIn.Load(), topic)
	})
	counter(failedProduce, counters.FailedProduceRequests.Load())
	counter(invalidCRC, counters.InvalidMessageCRCRecords.Load())
	counter(invalidOffset, counters.InvalidOffsetOrSequenceRecords.Load())

	// RequestChannel, SocketServer, KafkaRequestHandlerPool.
	st := s.NetworkStats()
	gauge(requestQueue, float64(st.QueueDepth))
	net := s.Config().Broker.Network
	c.mu.Lock()
	now := time.Now()
	elapsed := now.Sub(c.lastScrape)
	proc := idleShare(st.ProcessorIdle-c.lastProcIdle, elapsed, st.Processors)
	handlers := idleShare(st.HandlerIdle-c.lastHandlerIdle, elapsed, net.NumIOThreads)
	c.lastScrape, c.lastProcIdle, c.lastHandlerIdle = now, st.ProcessorIdle, st.HandlerIdle
	c.mu.Unlock()
	if st.Processors > 0 { // a broker of TLS listeners only has no Processors: no such gauge, not 0
		gauge(processorIdle, proc)
	}
	gauge(handlerIdle, handlers)

	// DelayedOperationPurgatory.
	ps := []purgatory{s.Produces, s.Fetches}
	for _, p := range s.Groups.Purgatories() {
		ps = append(ps, p)
	}
	for _, p := range ps {
		gauge(purgatorySize, float64(p.Watched()), p.Name())
		gauge(delayedOps, float64(p.Delayed()), p.Name())
	}

	// KafkaServer.
	state := 3.0 // RunningAsBroker
	select {
	case <-s.ShuttingDown():
		state = 7 // PendingControlledShutdown and BrokerShuttingDown are one here
	default:
	}
	gauge(brokerState, state)
}

// idleShare is idle time over elapsed time times threads, within [0, 1].
func idleShare(idle, elapsed time.Duration, threads int) float64 {
	if elapsed <= 0 || threads <= 0 {
		return 0
	}
	return min(max(float64(idle)/(float64(elapsed)*float64(threads)), 0), 1)
}

// controllerStates asks the controller for its partition states, giving
// up after a second: the question waits in the controller's event queue,
// and a scrape must not hang behind a long failover.
func controllerStates(c *controller.Controller) (map[commitlog.TopicPartition]controller.PartitionStateName, bool) {
	type answer struct {
		states map[commitlog.TopicPartition]controller.PartitionStateName
		err    error
	}
	out := make(chan answer, 1)
	go func() {
		states, _, err := c.StateMachines()
		out <- answer{states, err}
	}()
	select {
	case a := <-out:
		return a.states, a.err == nil
	case <-time.After(time.Second):
		return nil, false
	}
}
