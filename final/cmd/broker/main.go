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
	"fmt"
	"log/slog"
	"os"

	"github.com/kafkaworkbook/workbook/final/server"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
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
	cfg, err := server.LoadConfig(props, logger)
	if err != nil {
		return err
	}
	s, err := server.New(cfg, server.Options{Logger: logger})
	if err != nil {
		return err
	}
	return broker.RunUntilSignal(logger, s.Start, s.Shutdown)
}
