package server_test

import (
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/final/server"
	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestBadConfigNamesKeyAndValue: every refusal is a *commitlog.ConfigError
// naming the key and the value, whichever stage reads the key.
func TestBadConfigNamesKeyAndValue(t *testing.T) {
	for _, tc := range []struct {
		name       string
		props      map[string]string
		key, value string
	}{
		{"unknown key", map[string]string{"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "log.retention.dayz": "7"}, "log.retention.dayz", "7"},
		// Without broker.id: refused before ZooKeeper (nothing listens on
		// port 1) is asked for an id.
		{"unknown key, no id", map[string]string{"zookeeper.connect": "127.0.0.1:1", "log.dirs": "/nonexistent", "log.retention.dayz": "7"}, "log.retention.dayz", "7"},
		{"final's key, bad value", map[string]string{"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "broker.id.generation.enable": "yes"}, "broker.id.generation.enable", "yes"},
		{"stage 01's key, bad value", map[string]string{"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "log.segment.bytes": "ten"}, "log.segment.bytes", "ten"},
		{"stage 05's key missing", map[string]string{"broker.id": "1"}, "zookeeper.connect", ""},
		{"an id below -1", map[string]string{"broker.id": "-2", "zookeeper.connect": "127.0.0.1:2181"}, "broker.id", "-2"},
		{"a configured id among the generated ones", map[string]string{"broker.id": "1001", "zookeeper.connect": "127.0.0.1:2181"}, "broker.id", "1001"},
		{"no id and no generation", map[string]string{"broker.id.generation.enable": "false", "zookeeper.connect": "127.0.0.1:2181"}, "broker.id", "-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.LoadConfig(tc.props, quiet)
			var ce *commitlog.ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.key, ce.Key)
			require.Equal(t, tc.value, ce.Value)
			require.Contains(t, err.Error(), tc.key)
		})
	}
}

// TestConfiguredIDAboveTheReserveIsAllowedWithoutGeneration: Kafka's rule
// binds only while ids are generated.
func TestConfiguredIDAboveTheReserveIsAllowedWithoutGeneration(t *testing.T) {
	cfg, err := server.LoadConfig(map[string]string{"broker.id": "5000", "broker.id.generation.enable": "false",
		"zookeeper.connect": "127.0.0.1:2181", "log.dirs": t.TempDir()}, quiet)
	require.NoError(t, err)
	require.Equal(t, int32(5000), cfg.Replica.BrokerID)
	require.Equal(t, int32(5000), cfg.Broker.BrokerID)
}

// TestBrokerIDFromMetaProperties: a broker without broker.id that finds a
// log directory of its own keeps the id written there; ZooKeeper is not
// asked (the connect string points nowhere).
func TestBrokerIDFromMetaProperties(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.properties"), []byte("version=0\nbroker.id=1007\ncluster.id=abc\n"), 0o644))
	cfg, err := server.LoadConfig(map[string]string{"log.dirs": dir, "zookeeper.connect": "127.0.0.1:1"}, quiet)
	require.NoError(t, err)
	require.Equal(t, int32(1007), cfg.Broker.BrokerID)
	require.Equal(t, "meta.properties", cfg.BrokerIDSource)
}

// TestBrokerIDGeneratedFromZooKeeper: brokers without broker.id on new
// log directories get distinct ids above reserved.broker.max.id from
// /brokers/seqid.
func TestBrokerIDGeneratedFromZooKeeper(t *testing.T) {
	ens := zktest.StartStandalone(t)
	connect := strings.Join(ens.Addrs(), ",")
	seen := map[int32]bool{}
	for range 3 {
		cfg, err := server.LoadConfig(map[string]string{"log.dirs": t.TempDir(), "zookeeper.connect": connect,
			"reserved.broker.max.id": "500"}, quiet)
		require.NoError(t, err)
		id := cfg.Broker.BrokerID
		require.Greater(t, id, int32(500))
		require.Equal(t, id, cfg.Replica.BrokerID, "every stage sees the generated id")
		require.Equal(t, "zookeeper", cfg.BrokerIDSource)
		require.False(t, seen[id], "id %d generated twice", id)
		seen[id] = true
	}
}

// TestBrokerIDIsGeneratedUnderTheChroot: with a chroot in
// zookeeper.connect (host:port/chroot, as the sample shows; refused before)
// a broker without broker.id gets its id from the chroot's /brokers/seqid,
// creating the chroot, and a cluster on another chroot counts its own.
func TestBrokerIDIsGeneratedUnderTheChroot(t *testing.T) {
	ens := zktest.StartStandalone(t)
	connect := strings.Join(ens.Addrs(), ",")
	for _, tt := range []struct {
		chroot string
		id     int32
	}{{"/kafka/orders", 1001}, {"/kafka/orders", 1002}, {"/kafka/payments", 1001}} {
		cfg, err := server.LoadConfig(map[string]string{"log.dirs": t.TempDir(), "zookeeper.connect": connect + tt.chroot}, quiet)
		require.NoError(t, err, tt.chroot)
		require.Equal(t, "zookeeper", cfg.BrokerIDSource)
		require.Equal(t, tt.id, cfg.Broker.BrokerID, "a broker of %s", tt.chroot)
	}
	zk, err := kafkazk.Connect(connect, kafkazk.Options{Logger: quiet})
	require.NoError(t, err)
	defer zk.Close()
	for _, p := range []string{"/kafka/orders" + kafkazk.SeqIDPath, "/kafka/payments" + kafkazk.SeqIDPath} {
		ok, _, err := zk.Conn().Exists(p)
		require.NoError(t, err)
		require.True(t, ok, p)
	}
	ok, _, err := zk.Conn().Exists(kafkazk.SeqIDPath)
	require.NoError(t, err)
	require.False(t, ok, "nothing at the ensemble's root")
}

// sampleLine is a key=value line of the sample file, commented or not.
var sampleLine = regexp.MustCompile(`^#?([a-z][a-z0-9.]*)=(.*)$`)

// TestSampleConfigDocumentsEveryKeyWithItsDefault holds
// config/server.properties to what it promises: every key the broker
// knows is in it, every key in it is known, the file starts a broker as it
// is, and each commented line's value is the real default (setting it
// changes nothing).
func TestSampleConfigDocumentsEveryKeyWithItsDefault(t *testing.T) {
	f, err := os.ReadFile("../config/server.properties")
	require.NoError(t, err)
	documented := map[string]string{}
	for _, line := range strings.Split(string(f), "\n") {
		if m := sampleLine.FindStringSubmatch(line); m != nil {
			_, twice := documented[m[1]]
			require.False(t, twice, "%s is in the sample twice", m[1])
			documented[m[1]] = m[2]
		}
	}
	for _, k := range server.Keys() {
		_, ok := documented[k]
		require.True(t, ok, "config/server.properties does not document %s", k)
	}
	known := server.Keys()
	for k := range documented {
		require.Contains(t, known, k, "config/server.properties documents %s, which the broker does not know", k)
	}

	props, err := store.ReadPropertiesFile("../config/server.properties")
	require.NoError(t, err)
	props["broker.id"] = "0" // resolving -1 needs ZooKeeper: TestBrokerIDGeneratedFromZooKeeper
	_, err = server.ParseConfig(props, quiet)
	require.NoError(t, err, "the sample starts a broker as it is")

	base := map[string]string{"broker.id": "0", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": "/tmp/kafka-logs"}
	want, err := server.ParseConfig(base, quiet)
	require.NoError(t, err)
	for _, line := range strings.Split(string(f), "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(line, "#") || m[2] == "" || m[1] == "broker.id" {
			continue // a set key, or one whose default is not a value (max.connections, broker.rack)
		}
		t.Run(m[1], func(t *testing.T) {
			props := maps.Clone(base)
			props[m[1]] = m[2]
			got, err := server.ParseConfig(props, quiet)
			require.NoError(t, err)
			require.Equal(t, comparable(want), comparable(got), "%s=%s is not the default", m[1], m[2])
		})
	}
}

// comparable is a configuration without what differs between two parses
// of equal settings: the properties themselves.
func comparable(c server.Config) server.Config {
	c.Props = nil
	return server.Config{Config: c.Config, BrokerIDGeneration: c.BrokerIDGeneration, ReservedBrokerMaxID: c.ReservedBrokerMaxID,
		BrokerIDSource: c.BrokerIDSource}
}
