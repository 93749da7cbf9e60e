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
	"fmt"
	"log/slog"
	"os"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage05-controller/server"
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
