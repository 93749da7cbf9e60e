package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// Node is one container of the cluster.
type Node struct {
	Role string // "zookeeper", "broker" or "prometheus"
	ID   int    // the broker id, or the ZooKeeper server's myid (from 1)
	Name string // the container's name, and its host name on the network
	// Addr is its published port on 127.0.0.1: a broker's PLAINTEXT
	// listener (what clients are told), a ZooKeeper server's client
	// port, Prometheus's HTTP port.
	Addr string
}

// Cluster is a running cluster: Up starts one, Attach finds one another
// process started.
type Cluster struct {
	cfg        Config
	cli        *client.Client
	network    string
	zookeepers []Node // by myid
	brokers    []Node // by id
	prometheus *Node
}

// ErrExists is returned by Up when a cluster of that name runs already.
var ErrExists = errors.New("cluster: a cluster of that name exists")

// Up starts cfg's cluster and returns once every ZooKeeper server serves
// and every broker answers Metadata that lists all the brokers. A cluster
// that fails to start is removed.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.defaults()
	cli, err := engine()
	if err != nil {
		return nil, err
	}
	images := []string{cfg.ZooKeeperImage, cfg.BrokerImage}
	if cfg.ZooKeeperOnly {
		images = images[:1]
	}
	for _, img := range images {
		if err := requireImage(ctx, cli, img); err != nil {
			return nil, err
		}
	}
	if cfg.Prometheus {
		if err := requireImage(ctx, cli, cfg.PrometheusImage); err != nil {
			return nil, err
		}
	}
	if existing, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: nameFilter(cfg.Name)}); err != nil {
		return nil, fmt.Errorf("cluster: list containers: %w", err)
	} else if len(existing.Items) > 0 {
		return nil, fmt.Errorf("%w: %q has %d containers (make cluster-down removes it)", ErrExists, cfg.Name, len(existing.Items))
	}
	c := &Cluster{cfg: cfg, cli: cli, network: cfg.Name}
	if err := c.start(ctx); err != nil {
		down(context.Background(), cli, cfg.Name)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	cfg := c.cfg
	labels := map[string]string{Label: cfg.Name}
	maps.Copy(labels, cfg.Labels)
	if _, err := c.cli.NetworkCreate(ctx, c.network, client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
		return fmt.Errorf("cluster: create network %s: %w", c.network, err)
	}
	cfg.Logf("network %s", c.network)

	// ZooKeeper: the harness's servers (zktest's zoo.cfg and JVM flags),
	// named on the network; each its myid and a data volume.
	var hosts []string
	for i := range cfg.ZooKeepers {
		hosts = append(hosts, fmt.Sprintf("%s-zookeeper-%d", cfg.Name, i+1))
	}
	zooCfg := zktest.ZooCfg(hosts)
	for i, name := range hosts {
		addr, err := c.create(ctx, containerSpec{
			name: name, role: "zookeeper", id: i + 1, image: cfg.ZooKeeperImage, cmd: zktest.ServerCommand(),
			port: zkClientPort, volume: name + "-data", volumePath: "/data",
			files: map[string]string{"/conf/zoo.cfg": zooCfg, "/data/myid": strconv.Itoa(i + 1)},
			// Give up on a silent TCP peer after about 3 s (zktest's
			// reason: a partition leaves connections that look alive).
			sysctls: map[string]string{"net.ipv4.tcp_retries2": "3"},
		})
		if err != nil {
			return err
		}
		c.zookeepers = append(c.zookeepers, Node{Role: "zookeeper", ID: i + 1, Name: name, Addr: addr})
		cfg.Logf("%s serving clients on %s", name, addr)
	}
	if err := c.WaitZooKeeper(ctx); err != nil {
		return err
	}
	if cfg.ZooKeeperOnly {
		return nil
	}
	var connect []string
	for _, h := range hosts {
		connect = append(connect, fmt.Sprintf("%s:%d", h, zkClientPort))
	}
	zkConnect := strings.Join(connect, ",")

	for id := range cfg.Brokers {
		name := fmt.Sprintf("%s-broker-%d", cfg.Name, id)
		port := 0
		if id < len(cfg.BrokerPorts) {
			port = cfg.BrokerPorts[id]
		}
		addr, err := c.create(ctx, containerSpec{
			name: name, role: "broker", id: id, image: cfg.BrokerImage, port: ClientPort, hostPort: port,
			volume: name + "-data", volumePath: "/var/lib/kafka",
			sysctls: map[string]string{"net.ipv4.tcp_retries2": "3"},
			request: func(s *containerSpec, hostAddr string) {
				settings := cfg.brokerSettings(id, name, hostAddr, zkConnect)
				s.cmd = nil
				for _, k := range slices.Sorted(maps.Keys(settings)) {
					s.cmd = append(s.cmd, "--override", k+"="+settings[k])
				}
			},
		})
		if err != nil {
			return err
		}
		c.brokers = append(c.brokers, Node{Role: "broker", ID: id, Name: name, Addr: addr})
		cfg.Logf("%s: PLAINTEXT on %s", name, addr)
	}
	if err := c.WaitBrokers(ctx); err != nil {
		return err
	}
	if cfg.Prometheus {
		return c.startPrometheus(ctx)
	}
	return nil
}

// startPrometheus starts Prometheus scraping every broker's metrics
// listener each second (job "kafka").
func (c *Cluster) startPrometheus(ctx context.Context) error {
	var targets []string
	for _, b := range c.brokers {
		targets = append(targets, fmt.Sprintf("%q", fmt.Sprintf("%s:%d", b.Name, MetricsPort)))
	}
	config := fmt.Sprintf(`# Written by final/cluster: every broker's metrics.prometheus.listener.
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: kafka
    static_configs:
      - targets: [%s]
`, strings.Join(targets, ", "))
	name := c.cfg.Name + "-prometheus"
	addr, err := c.create(ctx, containerSpec{name: name, role: "prometheus", image: c.cfg.PrometheusImage,
		port: promPort, hostPort: c.cfg.PrometheusPort, files: map[string]string{"/etc/prometheus/prometheus.yml": config}})
	if err != nil {
		return err
	}
	c.prometheus = &Node{Role: "prometheus", Name: name, Addr: addr}
	err = poll(ctx, 60*time.Second, "Prometheus ready on "+addr, func() error {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
	if err == nil {
		c.cfg.Logf("%s on http://%s", name, addr)
	}
	return err
}

// Attach finds the running cluster called name (started by another
// process), for its addresses and faults.
func Attach(ctx context.Context, name string) (*Cluster, error) {
	cli, err := engine()
	if err != nil {
		return nil, err
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: nameFilter(name)})
	if err != nil {
		return nil, fmt.Errorf("cluster: list containers: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("cluster: no cluster %q (make cluster starts one)", name)
	}
	c := &Cluster{cfg: Config{Name: name}, cli: cli, network: name}
	c.cfg.defaults()
	for _, item := range list.Items {
		id, _ := strconv.Atoi(item.Labels[idLabel])
		n := Node{Role: item.Labels[roleLabel], ID: id, Name: strings.TrimPrefix(item.Names[0], "/")}
		for _, p := range item.Ports {
			if p.PublicPort != 0 {
				n.Addr = fmt.Sprintf("127.0.0.1:%d", p.PublicPort)
			}
		}
		switch n.Role {
		case "zookeeper":
			c.zookeepers = append(c.zookeepers, n)
		case "broker":
			c.brokers = append(c.brokers, n)
		case "prometheus":
			c.prometheus = &n
		}
	}
	slices.SortFunc(c.zookeepers, func(a, b Node) int { return a.ID - b.ID })
	slices.SortFunc(c.brokers, func(a, b Node) int { return a.ID - b.ID })
	return c, nil
}

// Down removes every container, the network and every volume of the
// cluster called name, running or not. Removing what is not there is not
// an error.
func Down(ctx context.Context, name string) error {
	cli, err := engine()
	if err != nil {
		return err
	}
	return down(ctx, cli, name)
}

func down(ctx context.Context, cli *client.Client, name string) error {
	var errs []error
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: nameFilter(name)})
	if err != nil {
		return fmt.Errorf("cluster: list containers: %w", err)
	}
	for _, item := range list.Items {
		if _, err := cli.ContainerRemove(ctx, item.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", item.Names, err))
		}
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: nameFilter(name)})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, n := range nets.Items {
			if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
			}
		}
	}
	vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: nameFilter(name)})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, v := range vols.Items {
			if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil {
				errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster: down %s: %w", name, errors.Join(errs...))
	}
	return nil
}

// nameFilter selects what belongs to the cluster called name.
func nameFilter(name string) client.Filters {
	return make(client.Filters).Add("label", Label+"="+name)
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.cfg.Name }

// Network is the cluster's Docker network.
func (c *Cluster) Network() string { return c.network }

// Brokers are the broker containers, by id.
func (c *Cluster) Brokers() []Node { return slices.Clone(c.brokers) }

// Broker is broker id's container.
func (c *Cluster) Broker(id int) Node { return c.brokers[id] }

// ZooKeepers are the ZooKeeper containers, by myid.
func (c *Cluster) ZooKeepers() []Node { return slices.Clone(c.zookeepers) }

// Prometheus is Prometheus's container, if it runs.
func (c *Cluster) Prometheus() (Node, bool) {
	if c.prometheus == nil {
		return Node{}, false
	}
	return *c.prometheus, true
}

// BootstrapServers are the brokers' published addresses.
func (c *Cluster) BootstrapServers() []string {
	var out []string
	for _, b := range c.brokers {
		out = append(out, b.Addr)
	}
	return out
}

// ZooKeeperConnect is the ensemble's client addresses on this machine.
func (c *Cluster) ZooKeeperConnect() []string {
	var out []string
	for _, z := range c.zookeepers {
		out = append(out, z.Addr)
	}
	return out
}

// Client returns a franz-go client seeded with every broker, with opts.
//
// It retries a connection that ends at once (kgo.AlwaysRetryEOF). A
// broker reached through a port Docker publishes answers that way while
// its container runs but the broker does not listen yet (it is starting):
// Docker's proxy accepts the connection on 127.0.0.1, fails to reach the
// container, and closes it. franz-go takes such an EOF for a TLS or SASL
// mismatch and fails the request, and with it every record buffered for
// that broker, where a refused connection would have been retried: a run
// of the fault suite without this option saw 14,093 records fail so during
// five full-cluster restarts (chapter 8).
func (c *Cluster) Client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.BootstrapServers()...), kgo.AlwaysRetryEOF()}, opts...)...)
}

// WaitZooKeeper waits until every ZooKeeper server serves (has a mode:
// leader, follower or standalone).
func (c *Cluster) WaitZooKeeper(ctx context.Context) error {
	for _, z := range c.zookeepers {
		if err := poll(ctx, 90*time.Second, z.Name+" serving", func() error {
			_, err := zktest.ServerMode(ctx, z.Addr)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// WaitBrokers waits until every broker answers Metadata that lists every
// broker (each has registered, and the controller has told it of the
// others).
func (c *Cluster) WaitBrokers(ctx context.Context) error {
	for _, b := range c.brokers {
		if err := c.WaitBroker(ctx, b.ID); err != nil {
			return err
		}
	}
	return nil
}

// WaitBroker waits until broker id answers Metadata listing every broker.
func (c *Cluster) WaitBroker(ctx context.Context, id int) error {
	b := c.brokers[id]
	return poll(ctx, 90*time.Second, b.Name+" serving on "+b.Addr, func() error {
		md, err := BrokerMetadata(ctx, b.Addr)
		if err != nil {
			return err
		}
		if len(md.Brokers) != len(c.brokers) {
			return fmt.Errorf("its metadata lists %d of %d brokers", len(md.Brokers), len(c.brokers))
		}
		return nil
	})
}

// BrokerMetadata asks the broker at addr alone for the cluster's brokers
// (a broker run by the caller too: clusterbench's processes).
func BrokerMetadata(ctx context.Context, addr string) (kadm.Metadata, error) {
	cl, err := SoloClient(addr)
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return kadm.NewClient(cl).BrokerMetadata(ctx)
}

// SoloClient is a client of the broker at addr alone, for one quick
// question: no retries, a short dial.
func SoloClient(addr string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
}

// poll calls f until it returns nil, ctx ends, or timeout passes; the
// error then says what was awaited and f's last error.
func poll(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
