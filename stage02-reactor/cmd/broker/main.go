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
	"fmt"
	"log/slog"
	"os"

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
	cfg, err := broker.ParseConfig(props, logger)
	if err != nil {
		return err
	}
	b, err := broker.New(cfg, broker.Options{Logger: logger})
	if err != nil {
		return err
	}
	return broker.RunUntilSignal(logger, b.Start, b.Shutdown)
}
