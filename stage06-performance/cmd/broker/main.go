// Command broker runs the stage 06 broker, started as Kafka's
// kafka-server-start.sh starts Kafka:
//
//	broker [server.properties] [--override key=value]...
//
// It takes stage 05's keys (zookeeper.connect and the rest) and serves
// fetches with sendfile(2).
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
	"github.com/kafkaworkbook/workbook/stage06-performance/server"
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
	cfg, err := s5.ParseConfig(props, logger)
	if err != nil {
		return err
	}
	s, err := server.New(cfg, server.Options{Options: s5.Options{Logger: logger}})
	if err != nil {
		return err
	}
	return broker.RunUntilSignal(logger, s.Start, s.Shutdown)
}
