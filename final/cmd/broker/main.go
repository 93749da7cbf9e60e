// Command broker runs the final broker, started as Kafka's
// kafka-server-start.sh starts Kafka:
//
//	broker [server.properties] [--override key=value]...
//
// Every key has Kafka's name and default (final/config/server.properties
// lists them all); only zookeeper.connect is required. Without broker.id,
// the broker takes the id in its log directory's meta.properties, or a new
// one from ZooKeeper. A bad or unknown key stops it with an error that
// names the key and the value.
package main

import (
	"log/slog"

	"github.com/kafkaworkbook/workbook/final/server"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

func main() {
	broker.Main(func(props map[string]string, logger *slog.Logger) (broker.Service, error) {
		cfg, err := server.LoadConfig(props, logger)
		if err != nil {
			return nil, err
		}
		return server.New(cfg, server.Options{Logger: logger})
	})
}
