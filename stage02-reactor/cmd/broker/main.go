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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

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
	props, err := parseArgs(args)
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
	// Catch the signals before announcing readiness: a supervisor may send
	// SIGTERM as soon as it sees the ready line.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if err := b.Start(); err != nil {
		return err
	}
	sig := <-stop
	logger.Info("shutting down", "signal", sig.String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return b.Shutdown(ctx)
}

// parseArgs reads an optional properties file and --override key=value
// arguments (also accepted as --override=key=value), overrides last.
func parseArgs(args []string) (map[string]string, error) {
	props := map[string]string{}
	var overrides []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--override":
			if i+1 >= len(args) {
				return nil, errors.New("--override needs key=value")
			}
			i++
			overrides = append(overrides, args[i])
		case strings.HasPrefix(a, "--override="):
			overrides = append(overrides, strings.TrimPrefix(a, "--override="))
		case strings.HasPrefix(a, "-"):
			return nil, fmt.Errorf("unknown flag %s; usage: broker [server.properties] [--override key=value]...", a)
		default:
			data, err := os.ReadFile(a)
			if err != nil {
				return nil, err
			}
			if props, err = broker.ParseProperties(string(data)); err != nil {
				return nil, fmt.Errorf("%s: %w", a, err)
			}
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--override %q: want key=value", o)
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return props, nil
}
