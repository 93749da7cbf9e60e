// Package server is the stage 06 broker: stage 05's, with the mechanisms
// of seed §2 that make Kafka fast switched on. So far: Fetch responses,
// to consumers and to followers alike, write their log regions with
// sendfile(2) (package zerocopy) instead of copying them through the
// broker's memory; and a topic's compression.type is applied to what
// producers send (compression.go).
package server

import (
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
	"github.com/kafkaworkbook/workbook/stage06-performance/zerocopy"
)

// Options are the parts of a server that are not Kafka configuration.
type Options struct {
	s5.Options
	// CopyFetches writes fetched log regions by reading them into memory
	// (stage 02's CopyRegionSender) instead of with sendfile(2): the
	// baseline of the benchmarks. Kafka has no such switch (it always
	// uses FileChannel.transferTo on a plaintext listener).
	CopyFetches bool
}

// New builds a stage 06 broker from a stage 05 configuration; nothing
// listens until Start.
func New(cfg s5.Config, opts Options) (*s5.Server, error) {
	if !opts.CopyFetches {
		cfg.Broker.Network.RegionSender = zerocopy.Default()
	}
	s, err := s5.New(cfg, opts.Options)
	if err != nil {
		return nil, err
	}
	s.Register(broker.ProduceAPI(recompressor{s: s, next: s.ProduceAppender()}))
	sender := "sendfile (zero copy)"
	if opts.CopyFetches || !zerocopy.Zero {
		sender = "pread and write (copies)"
	}
	s.Logger().Info("fetch responses write log regions with "+sender, "broker", cfg.Replica.BrokerID)
	return s, nil
}
