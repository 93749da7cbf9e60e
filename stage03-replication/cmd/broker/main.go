// Command broker runs the stage 03 replicating broker, started as Kafka's
// kafka-server-start.sh starts Kafka:
//
//	broker [server.properties] [--override key=value]...
//
// It takes stage 02's keys and the replica.* keys. It holds no partitions
// until a controller sends it LeaderAndIsr: in this stage cmd/cluster (or a
// test harness) plays the controller; stage 05 brings the real one.
package main

import (
	"log/slog"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
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
