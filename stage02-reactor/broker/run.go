package broker

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

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// ParseArgs reads a broker command line as Kafka's kafka-server-start.sh
// takes it: an optional properties file, then --override key=value
// arguments (also --override=key=value), which win.
func ParseArgs(args []string) (map[string]string, error) {
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
			var err error
			if props, err = store.ReadPropertiesFile(a); err != nil {
				return nil, err
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

// Service is what a broker command runs: the broker of any stage.
type Service interface {
	Start() error
	Shutdown(ctx context.Context) error
}

// Main is the main of every stage's broker command (cmd/broker) and of
// final's: it reads the command line as kafka-server-start.sh takes it
// (ParseArgs), builds the broker from the properties with build (the
// stage's ParseConfig and New), runs it until SIGTERM or SIGINT
// (RunUntilSignal), and exits with status 1 after printing the error that
// stopped it, which names the key and the value for a bad configuration.
func Main(build func(props map[string]string, logger *slog.Logger) (Service, error)) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := runMain(os.Args[1:], logger, build); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func runMain(args []string, logger *slog.Logger, build func(map[string]string, *slog.Logger) (Service, error)) error {
	props, err := ParseArgs(args)
	if err != nil {
		return err
	}
	s, err := build(props, logger)
	if err != nil {
		return err
	}
	return RunUntilSignal(logger, s.Start, s.Shutdown)
}

// RunUntilSignal starts a broker and shuts it down cleanly on SIGTERM or
// SIGINT, with up to 30 s for in-flight work.
func RunUntilSignal(logger *slog.Logger, start func() error, shutdown func(context.Context) error) error {
	// Catch the signals before announcing readiness: a supervisor may send
	// SIGTERM as soon as it sees the ready line.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	if err := start(); err != nil {
		return err
	}
	sig := <-stop
	logger.Info("shutting down", "signal", sig.String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return shutdown(ctx)
}
