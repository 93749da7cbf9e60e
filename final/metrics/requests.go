package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// requestMetrics are kafka.network:type=RequestMetrics, fed by the
// broker's request observer (broker.ObserveRequests) as each answer is
// written. Kafka names a request by its API (Produce, Metadata, ...) and
// times a Fetch twice, as Fetch and as FetchConsumer or FetchFollower.
type requestMetrics struct {
	count                             *prometheus.CounterVec   // RequestsPerSec{request,version}
	total, queue, local, remote, send *prometheus.HistogramVec // ...TimeMs{request}
}

func newRequestMetrics() *requestMetrics {
	hist := func(name, mbean string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kafka_network_requestmetrics_" + name,
			Help:    "kafka.network:type=RequestMetrics,name=" + mbean + ",request=<api>: in ms",
			Buckets: msBuckets,
		}, []string{"request"})
	}
	return &requestMetrics{
		count: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_network_requestmetrics_requests_total",
			Help: "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=<api>,version=<v>: requests answered",
		}, []string{"request", "version"}),
		total:  hist("totaltimems", "TotalTimeMs"),
		queue:  hist("requestqueuetimems", "RequestQueueTimeMs"),
		local:  hist("localtimems", "LocalTimeMs"),
		remote: hist("remotetimems", "RemoteTimeMs"),
		send:   hist("responsesendtimems", "ResponseSendTimeMs (here with ResponseQueueTimeMs: from the answer to its last byte written)"),
	}
}

// observe is the broker's request observer: it runs on a network
// goroutine for every answered request.
func (m *requestMetrics) observe(t *broker.RequestTiming) {
	name := kmsg.NameForKey(t.Header.APIKey)
	if name == "" {
		name = "Unknown"
	}
	version := strconv.Itoa(int(t.Header.APIVersion))
	m.record(name, version, t)
	if f, ok := t.Body.(*kmsg.FetchRequest); ok {
		sub := "FetchConsumer"
		if broker.FetchReplicaID(f) >= 0 {
			sub = "FetchFollower"
		}
		m.record(sub, version, t)
	}
}

func (m *requestMetrics) record(name, version string, t *broker.RequestTiming) {
	m.count.WithLabelValues(name, version).Inc()
	m.total.WithLabelValues(name).Observe(ms(t.Sent.Sub(t.Received)))
	m.queue.WithLabelValues(name).Observe(ms(t.Dequeued.Sub(t.Received)))
	m.local.WithLabelValues(name).Observe(ms(t.LocalDone.Sub(t.Dequeued)))
	m.remote.WithLabelValues(name).Observe(ms(t.Responded.Sub(t.LocalDone)))
	m.send.WithLabelValues(name).Observe(ms(t.Sent.Sub(t.Responded)))
}
