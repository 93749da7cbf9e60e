// Command broker runs the stage 02 single-node broker, started the way
// Kafka's kafka-server-start.sh starts Kafka:
//
//	broker [server.properties] [--override key=value]...
//
// Keys are Kafka's (broker.id, listeners, log.dirs, num.network.threads,
// log.segment.bytes, ...). An unknown key or a bad value stops start-up with
// a message naming it. The broker logs one line when it is ready, and shuts
// down cleanly on SIGTERM or SIGINT.
package main

import (
	"log/slog"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

func main() {
	broker.Main(func(props map[string]string, logger *slog.Logger) (broker.Service, error) {
		cfg, err := broker.ParseConfig(props, logger)
		if err != nil {
			return nil, err
		}
		return broker.New(cfg, broker.Options{Logger: logger})
	})
}
