package server

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kafkaworkbook/workbook/final/metrics"
	"github.com/kafkaworkbook/workbook/final/security"
	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
)

// The keys the final broker reads itself, with Kafka's names and
// defaults. Every other key goes to the stages below (stage 05's
// ParseConfig and, through it, stages 04 to 01), which refuse any key no
// stage knows.
const (
	// KeyBrokerID: the broker's id. Default -1: take the id recorded in
	// the log directory's meta.properties, or, on a new directory,
	// generate one (when KeyBrokerIDGeneration allows).
	KeyBrokerID = "broker.id"
	// KeyBrokerIDGeneration: whether a broker without broker.id gets one
	// from ZooKeeper. Default true.
	KeyBrokerIDGeneration = "broker.id.generation.enable"
	// KeyReservedBrokerMaxID: configured ids may go up to this;
	// generated ones start above it. Default 1000.
	KeyReservedBrokerMaxID = "reserved.broker.max.id"
)

// Config is the final broker's configuration: stage 05's (which holds
// every stage's below it) and the keys above.
type Config struct {
	s5.Config
	// BrokerIDGeneration and ReservedBrokerMaxID: see the keys.
	BrokerIDGeneration  bool
	ReservedBrokerMaxID int32
	// MetricsListener is metrics.KeyListener: where Prometheus metrics
	// are served (host:port); empty: not served.
	MetricsListener string
	// BrokerIDSource says where the broker id came from: "broker.id",
	// "meta.properties" or "zookeeper" (a generated id).
	BrokerIDSource string

	// own are final's keys as the properties gave them.
	own map[string]string
	// security are the security keys (package security reads them, per
	// listener): ssl.*, sasl.*, connections.max.reauth.ms and their
	// listener.name.<listener>. forms.
	security map[string]string
}

// ownKeys are the keys final reads and the stages below do not know.
var ownKeys = []string{KeyBrokerIDGeneration, KeyReservedBrokerMaxID, metrics.KeyListener}

// Keys lists every key the final broker knows, sorted: final's and every
// stage's below. config/server.properties documents each of them.
func Keys() []string {
	out := append(s5.Keys(), KeyBrokerID)
	out = append(out, ownKeys...)
	out = append(out, security.Keys()...)
	slices.Sort(out)
	return slices.Compact(out)
}

// LoadConfig reads a broker's configuration from properties (a
// server.properties file with its --override values applied, as
// broker.ParseArgs returns them). A broker.id of -1 (the default) is
// resolved as Kafka resolves it: the id in the log directory's
// meta.properties if there is one, else a new id from ZooKeeper's
// /brokers/seqid, which needs the ensemble to be reachable. Every bad or
// unknown key is an error that names the key and the value.
func LoadConfig(props map[string]string, logger *slog.Logger) (Config, error) {
	cfg, id, rest, err := parseOwnKeys(props)
	if err != nil {
		return Config{}, err
	}
	if id < 0 {
		// Every other key first: a typo is reported at once, not after
		// waiting for ZooKeeper to generate an id.
		check := maps.Clone(rest)
		check[KeyBrokerID] = "0"
		if _, err := s5.ParseConfig(check, slog.New(slog.DiscardHandler)); err != nil {
			return Config{}, err
		}
		id, cfg.BrokerIDSource, err = resolveBrokerID(rest, cfg, logger)
		if err != nil {
			return Config{}, err
		}
		rest[KeyBrokerID] = strconv.Itoa(int(id))
	}
	base, err := s5.ParseConfig(rest, logger)
	if err != nil {
		return Config{}, err
	}
	cfg.Config = base
	return cfg, nil
}

// ParseConfig reads a configuration whose broker.id is set, without
// touching the disk or ZooKeeper (LoadConfig resolves a missing id).
func ParseConfig(props map[string]string, logger *slog.Logger) (Config, error) {
	cfg, id, rest, err := parseOwnKeys(props)
	if err != nil {
		return Config{}, err
	}
	if id < 0 {
		return Config{}, &commitlog.ConfigError{Key: KeyBrokerID, Value: strconv.Itoa(int(id)),
			Reason: "not resolved: LoadConfig resolves -1 from meta.properties or ZooKeeper"}
	}
	base, err := s5.ParseConfig(rest, logger)
	if err != nil {
		return Config{}, err
	}
	cfg.Config = base
	return cfg, nil
}

// parseOwnKeys reads final's keys and broker.id (-1 when unset), and
// returns the rest of the properties for the stages below (a copy: props
// is not changed).
func parseOwnKeys(props map[string]string) (cfg Config, id int32, rest map[string]string, err error) {
	cfg = Config{BrokerIDGeneration: true, ReservedBrokerMaxID: 1000, BrokerIDSource: KeyBrokerID}
	id = -1
	rest = maps.Clone(props)
	if rest == nil {
		rest = map[string]string{}
	}
	cfg.own, cfg.security = map[string]string{}, map[string]string{}
	for _, k := range ownKeys {
		if v, ok := rest[k]; ok {
			cfg.own[k] = v
		}
		delete(rest, k)
	}
	for k, v := range rest {
		if security.IsKey(k) {
			cfg.security[k] = v
			delete(rest, k)
		}
	}
	if raw, ok := props[KeyBrokerIDGeneration]; ok {
		v, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return cfg, id, nil, &commitlog.ConfigError{Key: KeyBrokerIDGeneration, Value: raw, Reason: "not true or false"}
		}
		cfg.BrokerIDGeneration = v
	}
	if raw, ok := props[KeyReservedBrokerMaxID]; ok {
		v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
		if err != nil || v < 0 {
			return cfg, id, nil, &commitlog.ConfigError{Key: KeyReservedBrokerMaxID, Value: raw, Reason: "not a whole number from 0 to 2147483647"}
		}
		cfg.ReservedBrokerMaxID = int32(v)
	}
	if raw, ok := props[metrics.KeyListener]; ok && strings.TrimSpace(raw) != "" {
		if _, port, err := net.SplitHostPort(strings.TrimSpace(raw)); err != nil || port == "" {
			return cfg, id, nil, &commitlog.ConfigError{Key: metrics.KeyListener, Value: raw, Reason: "not host:port (0.0.0.0:9404, or empty for no metrics endpoint)"}
		}
		cfg.MetricsListener = strings.TrimSpace(raw)
	}
	if raw, ok := props[KeyBrokerID]; ok {
		v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
		if err != nil || v < -1 {
			return cfg, id, nil, &commitlog.ConfigError{Key: KeyBrokerID, Value: raw, Reason: "not -1 (generate) or a whole number from 0"}
		}
		id = int32(v)
	}
	switch {
	case id < 0 && !cfg.BrokerIDGeneration:
		return cfg, id, nil, &commitlog.ConfigError{Key: KeyBrokerID, Value: strconv.Itoa(int(id)),
			Reason: "required when broker.id.generation.enable is false"}
	case cfg.BrokerIDGeneration && id > cfg.ReservedBrokerMaxID:
		// Kafka's rule: configured ids stay at or below the reserved
		// maximum, so that they never meet a generated one.
		return cfg, id, nil, &commitlog.ConfigError{Key: KeyBrokerID, Value: strconv.Itoa(int(id)),
			Reason: fmt.Sprintf("must not exceed reserved.broker.max.id (%d) while broker.id.generation.enable is true", cfg.ReservedBrokerMaxID)}
	case cfg.ReservedBrokerMaxID == math.MaxInt32 && cfg.BrokerIDGeneration:
		return cfg, id, nil, &commitlog.ConfigError{Key: KeyReservedBrokerMaxID, Value: strconv.Itoa(int(cfg.ReservedBrokerMaxID)),
			Reason: "leaves no room for generated ids"}
	}
	return cfg, id, rest, nil
}

// resolveBrokerID finds the id of a broker configured without one:
// meta.properties first (a restarted broker keeps its id), then a new id
// from ZooKeeper (Kafka's KafkaServer.getOrGenerateBrokerId).
func resolveBrokerID(props map[string]string, cfg Config, logger *slog.Logger) (int32, string, error) {
	dir := logDir(props)
	path := filepath.Join(dir, "meta.properties")
	meta, err := store.ReadPropertiesFile(path)
	switch {
	case err == nil:
		raw := meta[KeyBrokerID]
		id, err := strconv.ParseInt(raw, 10, 32)
		if err != nil || id < 0 {
			return 0, "", fmt.Errorf("%s: broker.id %q is not a broker id", path, raw)
		}
		return int32(id), "meta.properties", nil
	case !errors.Is(err, fs.ErrNotExist):
		return 0, "", fmt.Errorf("read %s: %w", path, err)
	}
	connect := strings.TrimSpace(props[s5.KeyZookeeperConnect])
	if connect == "" {
		return 0, "", &commitlog.ConfigError{Key: s5.KeyZookeeperConnect, Value: "",
			Reason: "required: the ZooKeeper ensemble, host:port[,host:port...][/chroot]"}
	}
	zk, err := kafkazk.Connect(connect, kafkazk.Options{SessionTimeout: kafkazk.DefaultSessionTimeout,
		ConnectionTimeout: kafkazk.DefaultSessionTimeout, Logger: logger.With("component", "zookeeper")})
	if err != nil {
		return 0, "", fmt.Errorf("generate a broker id: %w", err)
	}
	defer zk.Close()
	seq, err := zk.GenerateBrokerSequenceID()
	if err != nil {
		return 0, "", fmt.Errorf("generate a broker id: %w", err)
	}
	id := int64(seq) + int64(cfg.ReservedBrokerMaxID)
	if id > math.MaxInt32 {
		return 0, "", fmt.Errorf("generate a broker id: /brokers/seqid's version %d + reserved.broker.max.id %d overflows", seq, cfg.ReservedBrokerMaxID)
	}
	logger.Info("generated a broker id", "broker.id", id, "seqid", seq, "reserved.broker.max.id", cfg.ReservedBrokerMaxID)
	return int32(id), "zookeeper", nil
}

// logDir is the log directory the stages below will use (log.dirs, else
// log.dir, else Kafka's default).
func logDir(props map[string]string) string {
	if v, ok := props["log.dirs"]; ok {
		return strings.TrimSpace(v)
	}
	if v, ok := props["log.dir"]; ok {
		return strings.TrimSpace(v)
	}
	return "/tmp/kafka-logs"
}
