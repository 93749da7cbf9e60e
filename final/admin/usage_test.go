package admin_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestHelpIsTheDocumentation: `admin help`, `admin help <command>` and
// `admin <command> -h` print the usage on stdout and exit 0; every
// command's text names each flag the command takes.
func TestHelpIsTheDocumentation(t *testing.T) {
	out := ok(t, "help")
	for _, c := range []string{"topics", "groups", "configs", "reassign", "cluster", "--bootstrap-server", "--command-config"} {
		require.Contains(t, out, c)
	}
	for c, flags := range map[string][]string{
		"topics": {"--list", "--describe", "--create", "--delete", "--alter", "--topic", "--partitions",
			"--replication-factor", "--config", "--if-exists", "--if-not-exists", "--exclude-internal",
			"--under-replicated-partitions", "--unavailable-partitions"},
		"groups": {"--list", "--describe", "--delete", "--reset-offsets", "--group", "--topic", "--all-topics",
			"--to-earliest", "--to-latest", "--to-offset", "--shift-by", "--dry-run", "--execute", "--state", "--members"},
		"configs": {"--describe", "--alter", "--entity-type", "--entity-name", "--entity-default", "--add-config",
			"--delete-config", "--all", "--zookeeper"},
		"reassign": {"--execute", "--verify", "--list", "--cancel", "--topic", "--replicas", "--reassignment-json-file"},
		"cluster":  {"--bootstrap-server"},
	} {
		text := ok(t, "help", c)
		require.Equal(t, text, ok(t, c, "-h"))
		require.Equal(t, text, ok(t, c, "--help"))
		for _, f := range flags {
			require.Contains(t, text, f+" ", "admin %s -h documents %s", c, f)
		}
	}
}

// TestCommandLineMistakesExitOneWithAPointerToHelp: what is wrong, the
// way to the usage, status 1, nothing on stdout; no cluster is needed
// to find these.
func TestCommandLineMistakesExitOneWithAPointerToHelp(t *testing.T) {
	bs := "127.0.0.1:1"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `admin: no command "nosuch"`},
		{[]string{"topics", "--bootstrap-server", bs}, "exactly one of --alter, --create, --delete, --describe, --list is required"},
		{[]string{"topics", "--bootstrap-server", bs, "--list", "--describe"}, "exactly one of"},
		{[]string{"topics", "--list"}, "--bootstrap-server is required"},
		{[]string{"topics", "--bootstrap-server", bs, "--create"}, "--create needs --topic"},
		{[]string{"topics", "--bootstrap-server", bs, "--alter", "--topic", "t"}, "--alter needs --partitions"},
		{[]string{"topics", "--bootstrap-server", bs, "--describe", "--config", "a=b"}, "--config goes with --create"},
		{[]string{"topics", "--bootstrap-server", bs, "--create", "--topic", "t", "--config", "novalue"}, `"novalue" is not key=value`},
		{[]string{"topics", "--bootstrap-server", bs, "--list", "extra"}, `unexpected argument "extra"`},
		{[]string{"topics", "--bootstrap-server", bs, "--nosuch"}, "flag provided but not defined: -nosuch"},
		{[]string{"groups", "--bootstrap-server", bs, "--describe"}, "--describe needs --group"},
		{[]string{"groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "g", "--topic", "t"},
			"exactly one of --to-earliest, --to-latest, --to-offset, --shift-by"},
		{[]string{"groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "g", "--to-latest"}, "needs --topic or --all-topics"},
		{[]string{"groups", "--bootstrap-server", bs, "--describe", "--group", "g", "--execute"}, "--execute goes with --reset-offsets"},
		{[]string{"groups", "--bootstrap-server", bs, "--list", "--state"}, "--state and --members go with --describe"},
		{[]string{"configs", "--bootstrap-server", bs, "--describe", "--entity-type", "groups"}, "--entity-type must be topics, brokers or users"},
		{[]string{"configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name", "t"}, "--alter needs --add-config or --delete-config"},
		{[]string{"configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers", "--entity-name", "b0", "--add-config", "a=b"}, "a broker is named by its id"},
		{[]string{"configs", "--bootstrap-server", bs, "--alter", "--entity-type", "users", "--entity-name", "u", "--add-config", "producer_byte_rate=1024"},
			"SCRAM-SHA-256 and SCRAM-SHA-512 credentials only"},
		{[]string{"topics", "--bootstrap-server", bs, "--list", "--under-replicated-partitions"}, "--under-replicated-partitions and --unavailable-partitions go with --describe"},
		{[]string{"topics", "--bootstrap-server", bs, "--describe", "--under-replicated-partitions", "--unavailable-partitions"}, "not both"},
		{[]string{"reassign", "--bootstrap-server", bs}, "exactly one of --cancel, --execute, --list, --verify is required"},
		{[]string{"reassign", "--bootstrap-server", bs, "--execute", "--topic", "t"}, "--execute needs a plan: --topic and --replicas, or --reassignment-json-file"},
		{[]string{"reassign", "--bootstrap-server", bs, "--verify", "--topic", "t", "--replicas", "0:1,2"}, `"0:1,2" is not partition=broker,broker,...`},
		{[]string{"reassign", "--bootstrap-server", bs, "--execute", "--topic", "t", "--replicas", "0=1,x"}, `"x" is not a broker id`},
		{[]string{"reassign", "--bootstrap-server", bs, "--execute", "--topic", "t", "--replicas", "0=1,1"}, "partition t-0: the replicas 1,1 must be distinct broker ids"},
		{[]string{"reassign", "--bootstrap-server", bs, "--execute", "--topic", "t", "--replicas", "0=1", "--replicas", "0=2"}, "partition t-0 is in the plan twice"},
		{[]string{"reassign", "--bootstrap-server", bs, "--list", "--topic", "t"}, "--list takes no plan"},
		{[]string{"reassign", "--bootstrap-server", bs, "--cancel", "--topic", "t", "--replicas", "0=1", "--reassignment-json-file", "p.json"}, "either as --reassignment-json-file or as --topic and --replicas"},
		{[]string{"configs", "--zookeeper", "zk:2181", "--describe", "--entity-type", "users"}, "--zookeeper goes with --alter --entity-type users only"},
	} {
		r := run(t, tt.args...)
		require.Equal(t, 1, r.code, "admin %s", strings.Join(tt.args, " "))
		require.Contains(t, r.err, tt.want, "admin %s", strings.Join(tt.args, " "))
		require.Empty(t, r.out)
		if tt.args[0] != "nosuch" {
			require.Contains(t, r.err, fmt.Sprintf("Run 'admin %s -h' for usage.", tt.args[0]))
		}
	}
}

// TestClusterPrintsIDControllerAndBrokers: admin cluster names the
// cluster, its controller and every broker as Kafka prints a node.
func TestClusterPrintsIDControllerAndBrokers(t *testing.T) {
	_, bs := fakeCluster(t, kfake.ClusterID("workbook-cluster"))
	m, err := observer(t, bs).BrokerMetadata(ctxT(t))
	require.NoError(t, err)
	want := "Cluster ID: workbook-cluster\n"
	for _, b := range m.Brokers {
		if b.NodeID == m.Controller {
			want += fmt.Sprintf("Controller: %s:%d (id: %d rack: %s)\n", b.Host, b.Port, b.NodeID, *b.Rack)
		}
	}
	want += "Brokers:\n"
	for _, b := range m.Brokers {
		want += fmt.Sprintf("  %s:%d (id: %d rack: %s)\n", b.Host, b.Port, b.NodeID, *b.Rack) // kfake's rack is "krack"
	}
	require.Len(t, m.Brokers, 3)
	require.Equal(t, want, ok(t, "cluster", "--bootstrap-server", bs))
}
