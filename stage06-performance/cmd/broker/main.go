// Command broker runs the stage 06 broker, started as Kafka's
// kafka-server-start.sh starts Kafka:
//
//	broker [server.properties] [--override key=value]...
//
// It takes stage 05's keys (zookeeper.connect and the rest) and serves
// fetches with sendfile(2).
package main

import (
	"log/slog"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
	"github.com/kafkaworkbook/workbook/stage06-performance/server"
)

func main() {
	broker.Main(func(props map[string]string, logger *slog.Logger) (broker.Service, error) {
		cfg, err := s5.ParseConfig(props, logger)
		if err != nil {
			return nil, err
		}
		return server.New(cfg, server.Options{Options: s5.Options{Logger: logger}})
	})
}
