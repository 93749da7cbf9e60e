// Package server assembles the final broker: stage 06's broker (stage
// 05's controller, groups and ZooKeeper state, stage 04's ISR and acks,
// stage 03's replication, stage 02's network and APIs, stage 01's log,
// with sendfile and compression.type switched on), configured from one
// set of Kafka keys (config.go).
//
// What final adds is integration: the configuration (broker ids
// generated from ZooKeeper as Kafka does), and the wiring of the
// security and metrics packages. No mechanism lives here: each is in the
// stage that teaches it.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/final/metrics"
	"github.com/kafkaworkbook/workbook/final/security"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
	s6 "github.com/kafkaworkbook/workbook/stage06-performance/server"
)

// Options are the parts of a server that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger // slog.Default if nil
}

// Server is the final broker.
type Server struct {
	*s5.Server
	// Metrics are the broker's Prometheus metrics (package metrics),
	// served on metrics.prometheus.listener when it is set.
	Metrics *metrics.Metrics

	cfg      Config
	logger   *slog.Logger
	endpoint *metrics.Endpoint // nil when metrics are not served
	// scram holds the SCRAM credentials the SASL listeners check, filled
	// from ZooKeeper by scramWatch (nil when no listener enables SCRAM).
	scram      *security.CredentialCache
	scramWatch *security.ZKCredentials
}

// New builds the broker from cfg; nothing listens until Start.
func New(cfg Config, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, logger: opts.Logger, scram: security.NewCredentialCache()}
	perListener, err := s.listenerSecurity()
	if err != nil {
		return nil, err
	}
	base, err := s6.New(cfg.Config, s6.Options{Options: s5.Options{Logger: opts.Logger, BrokerConfigs: cfg.describedKeys(),
		PerListener: perListener}})
	if err != nil {
		return nil, err
	}
	s.Server = base
	for _, api := range security.APIs() { // ApiVersions lists SaslHandshake and SaslAuthenticate, as Kafka's does
		base.Register(api)
	}
	if s.Metrics, err = metrics.New(base); err != nil { // before Start: it installs the request observer
		return nil, err
	}
	return s, nil
}

// listenerSecurity reads each listener's TLS and SASL from the security
// keys (package security) and hands them to the broker through stage
// 02's per-listener seam: a *tls.Config for SSL and SASL_SSL listeners, a
// SASL gate in front of SASL_PLAINTEXT and SASL_SSL ones. A bad key stops
// the broker here, before anything listens.
func (s *Server) listenerSecurity() (broker.ListenerOptions, error) {
	per := map[string]security.Listener{}
	for _, l := range s.cfg.Broker.Listeners {
		sec, err := security.ForListener(s.cfg.security, l.Name, l.SecurityProtocol, s.scram, s.logger)
		if err != nil {
			return broker.ListenerOptions{}, err
		}
		per[l.Name] = sec
	}
	return broker.ListenerOptions{
		TLS: func(l broker.Listener) (*tls.Config, error) { return per[l.Name].TLS, nil },
		WrapHandler: func(l broker.Listener, next network.Handler) network.Handler {
			if sec, ok := per[l.Name]; ok {
				return sec.Wrap(next)
			}
			return next
		},
		InitialMaxFrameBytes: func(l broker.Listener) int32 { return per[l.Name].MaxReceiveBeforeAuth },
	}, nil
}

// usesScram reports whether a SASL listener enables a SCRAM mechanism.
func (s *Server) usesScram() bool {
	for _, l := range s.cfg.Broker.Listeners {
		if !strings.HasPrefix(l.SecurityProtocol, "SASL_") {
			continue
		}
		mechs, _ := security.ListenerValue(s.cfg.security, l.Name, security.KeySASLEnabledMechanisms)
		if strings.Contains(strings.ToUpper(mechs), "SCRAM-") {
			return true
		}
	}
	return false
}

// FinalConfig is the configuration the server was built from.
func (s *Server) FinalConfig() Config { return s.cfg }

// Start starts the broker: it listens, registers in ZooKeeper and runs
// for controller.
func (s *Server) Start() error {
	if s.usesScram() {
		// Before the listeners open: a client's first SCRAM login finds
		// every user ZooKeeper holds.
		w, err := security.WatchZKCredentialsInto(s.ZK, s.scram, s.logger.With("component", "scram-credentials"))
		if err != nil {
			s.Metrics.Close()
			s.ZK.Close() // stage 05's Start, which would close it on failure, never ran
			return err
		}
		s.scramWatch = w
	}
	if err := s.Server.Start(); err != nil { // on failure it has shut down and closed ZooKeeper
		s.stopWatchers()
		return err
	}
	if s.cfg.MetricsListener != "" {
		e, err := s.Metrics.Serve(s.cfg.MetricsListener, s.logger)
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = errors.Join(err, s.Server.Shutdown(ctx))
			s.stopWatchers()
			return err
		}
		s.endpoint = e
	}
	s.logger.Info("final broker started", "broker.id", s.ID(), "broker.id.source", s.cfg.BrokerIDSource)
	return nil
}

// MetricsAddr is where the metrics are served, nil when they are not.
func (s *Server) MetricsAddr() net.Addr {
	if s.endpoint == nil {
		return nil
	}
	return s.endpoint.Addr()
}

// Shutdown stops the broker as stage 05 does (controlled shutdown first),
// then the metrics endpoint, which answers scrapes until the end.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.Server.Shutdown(ctx)
	if s.endpoint != nil {
		err = errors.Join(err, s.endpoint.Close(ctx))
	}
	s.stopWatchers()
	return err
}

// stopWatchers ends what Start began besides the broker: the flush
// observer of the metrics and the SCRAM credentials' ZooKeeper listener.
func (s *Server) stopWatchers() {
	s.Metrics.Close()
	if s.scramWatch != nil {
		s.scramWatch.Stop()
	}
}

// describedKeys are final's own keys as DescribeConfigs shows them (stage
// 05's Options.BrokerConfigs seam): read-only, with their source.
func (c Config) describedKeys() []s5.BrokerConfigEntry {
	_, genSet := c.own[KeyBrokerIDGeneration]
	_, maxSet := c.own[KeyReservedBrokerMaxID]
	_, metricsSet := c.own[metrics.KeyListener]
	entries := []s5.BrokerConfigEntry{
		{Name: metrics.KeyListener, Value: c.MetricsListener, Default: !metricsSet, Type: kmsg.ConfigTypeString,
			Doc: "Where Prometheus metrics are served, host:port; empty: not served."},
		{Name: KeyBrokerIDGeneration, Value: strconv.FormatBool(c.BrokerIDGeneration), Default: !genSet, Type: kmsg.ConfigTypeBoolean,
			Doc: "Whether a broker without broker.id gets one from ZooKeeper, above reserved.broker.max.id."},
		{Name: KeyReservedBrokerMaxID, Value: strconv.Itoa(int(c.ReservedBrokerMaxID)), Default: !maxSet, Type: kmsg.ConfigTypeInt,
			Doc: "The largest configurable broker id; generated ids start above it."},
	}
	for _, k := range slices.Sorted(maps.Keys(c.security)) {
		entries = append(entries, s5.BrokerConfigEntry{Name: k, Value: c.security[k], Sensitive: security.Sensitive(k), Type: kmsg.ConfigTypeString})
	}
	return entries
}
