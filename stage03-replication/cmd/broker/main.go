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
	"fmt"
	"log/slog"
	"os"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(os.Args[1:], logger); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func run(args []string, logger *slog.Logger) error {
	props, err := broker.ParseArgs(args)
	if err != nil {
		return err
	}
	cfg, err := server.ParseConfig(props, logger)
	if err != nil {
		return err
	}
	s, err := server.New(cfg, server.Options{Logger: logger})
	if err != nil {
		return err
	}
	return broker.RunUntilSignal(logger, s.Start, s.Shutdown)
}
