// Command broker runs the stage 05 broker, started as Kafka's
// kafka-server-start.sh starts Kafka:
//
//	broker [server.properties] [--override key=value]...
//
// It takes the keys of stages 02-04 and zookeeper.connect,
// zookeeper.session.timeout.ms, controlled.shutdown.* and the other keys of
// this stage (package server). It registers in ZooKeeper, runs for
// controller, and on SIGTERM asks the controller to move its leaderships
// away before it stops (a controlled shutdown).
package main

import (
	"log/slog"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage05-controller/server"
)

func main() {
	broker.Main(func(props map[string]string, logger *slog.Logger) (broker.Service, error) {
		cfg, err := server.ParseConfig(props, logger)
		if err != nil {
			return nil, err
		}
		return server.New(cfg, server.Options{Logger: logger})
	})
}
