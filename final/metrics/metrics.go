package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
)

// KeyListener is the configuration key final's broker reads for the
// address the metrics are served on, host:port (e.g. 0.0.0.0:9404, the
// port Prometheus's port list gives the JMX exporter); empty: not served.
// Kafka has no such key: its metrics are MBeans, and a JMX exporter agent
// started with the JVM serves them.
const KeyListener = "metrics.prometheus.listener"

// Metrics are one broker's metrics in a registry of their own: Kafka's
// metrics read from the broker at scrape time, the request and flush
// histograms fed as requests are answered and logs flushed, and Go's
// runtime and process metrics (where the JMX exporter has the JVM's).
type Metrics struct {
	// Registry holds every collector; Handler serves it.
	Registry *prometheus.Registry

	stopFlushes func() // ends the commitlog.ObserveFlushes registration
}

// New registers s's metrics. Call it before s.Start: the request
// histograms need the broker's request observer (broker.ObserveRequests),
// which is set once, before the broker serves. Close ends what New started.
func New(s *s5.Server) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	req := newRequestMetrics()
	flush := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kafka_log_logflushstats_logflushrateandtimems",
		Help:    "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs: the time of each log flush, in ms (every log of the process)",
		Buckets: msBuckets,
	})
	for _, c := range []prometheus.Collector{
		newBrokerCollector(s), req.count, req.total, req.queue, req.local, req.remote, req.send, flush,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	s.ObserveRequests(req.observe)
	m := &Metrics{Registry: reg}
	m.stopFlushes = commitlog.ObserveFlushes(func(d time.Duration) { flush.Observe(ms(d)) })
	return m, nil
}

// Close stops observing flushes (the registry still answers).
func (m *Metrics) Close() { m.stopFlushes() }

// Handler serves the registry in Prometheus's text format (or
// OpenMetrics, if the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry, EnableOpenMetrics: true})
}

// Endpoint is an HTTP server answering /metrics.
type Endpoint struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Serve listens on addr (host:port; port 0 picks one) and serves
// m.Handler at /metrics until Close; it returns once it listens.
func (m *Metrics) Serve(addr string, logger *slog.Logger) (*Endpoint, error) {
	if logger == nil {
		logger = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	e := &Endpoint{ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	logger.Info("serving Prometheus metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return e, nil
}

// Addr is the address the endpoint listens on.
func (e *Endpoint) Addr() net.Addr { return e.ln.Addr() }

// Close stops the endpoint, letting scrapes under way finish for up to
// five seconds or until ctx ends, then closing what is left.
func (e *Endpoint) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		e.srv.Close() // scrapes still under way: cut them
	}
	<-e.done
	return nil
}

// msBuckets are the histograms' buckets in milliseconds, from 0.1 ms (a
// Metadata request on an idle broker) to 30 s (request.timeout.ms).
var msBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
