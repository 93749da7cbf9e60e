package admin

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

const clusterUsage = `admin cluster: show the cluster id, the controller and the brokers

Usage:
  admin cluster --bootstrap-server host:port [--command-config file]

Prints what a Metadata request answers about the cluster, each broker as
Kafka's tools print a node (host:port (id: 0 rack: null)), the endpoint being
the one advertised on the listener this command connected to:

  Cluster ID: 5wXAsVDbTjGp6o3p5mb2Bg
  Controller: localhost:9093 (id: 1 rack: null)
  Brokers:
    localhost:9092 (id: 0 rack: null)
    localhost:9093 (id: 1 rack: null)

Options:
  --bootstrap-server, --command-config, --timeout: see 'admin help'
`

func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var conn connFlags
	fs := newFlagSet("cluster")
	conn.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	s, ctx, err := conn.connect(ctx, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	m, err := s.adm.BrokerMetadata(ctx)
	if err != nil {
		return reach(err)
	}
	id := m.Cluster
	if id == "" {
		id = "null"
	}
	fmt.Fprintf(s.out, "Cluster ID: %s\n", id)
	controller := "none"
	for _, b := range m.Brokers {
		if b.NodeID == m.Controller {
			controller = node(b)
		}
	}
	fmt.Fprintf(s.out, "Controller: %s\n", controller)
	fmt.Fprintln(s.out, "Brokers:")
	for _, b := range m.Brokers {
		fmt.Fprintf(s.out, "  %s\n", node(b))
	}
	return nil
}

// node prints a broker as Kafka's Node.toString does.
func node(b kgo.BrokerMetadata) string {
	rack := "null"
	if b.Rack != nil {
		rack = *b.Rack
	}
	return b.Host + ":" + strconv.Itoa(int(b.Port)) + " (id: " + strconv.Itoa(int(b.NodeID)) + " rack: " + rack + ")"
}
