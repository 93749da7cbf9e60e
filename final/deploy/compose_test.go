package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// projectPrefix starts the Compose project name of every test run; the
// process id follows, so that a later run can tell a dead run's leftovers
// (docker ps --filter label=com.docker.compose.project) from a live one's.
const projectPrefix = "workbook-composetest-"

// The services compose.yaml defines, and the brokers' ids.
var (
	services = []string{"broker-0", "broker-1", "broker-2", "prometheus", "zookeeper-1", "zookeeper-2", "zookeeper-3"}
	brokers  = []string{"broker-0", "broker-1", "broker-2"}
)

// compose runs docker-compose on compose.yaml with env added to this
// process's environment, and returns its combined output.
func compose(ctx context.Context, t testing.TB, env []string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatalf("docker-compose is not installed: run ./scripts/deps.sh docker-compose (make test does): %v", err)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"-f", "compose.yaml"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker-compose %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// TestComposeFileIsValid: docker-compose reads the file without a
// complaint, defines the seven services, and publishes every port on
// 127.0.0.1 only, each broker advertising the host port its environment
// variable chose.
func TestComposeFileIsValid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := compose(ctx, t, nil, "config", "-q")
	require.NoError(t, err)
	out, err := compose(ctx, t, nil, "config", "--services")
	require.NoError(t, err)
	got := strings.Fields(out)
	slices.Sort(got)
	require.Equal(t, services, got)

	env := []string{"BROKER0_PORT=19001", "BROKER1_PORT=19002", "BROKER2_PORT=19003", "PROMETHEUS_PORT=19004"}
	out, err = compose(ctx, t, env, "config")
	require.NoError(t, err)
	published := regexp.MustCompile(`(?m)^\s+- (\S+):(\d+):(\d+)/tcp$`).FindAllStringSubmatch(out, -1)
	require.Len(t, published, 4, "three brokers and Prometheus publish a port:\n%s", out)
	for _, p := range published {
		require.Equal(t, "127.0.0.1", p[1], "published on the loopback only: %s", p[0])
	}
	for i := range brokers {
		port := 19001 + i
		require.Contains(t, out, fmt.Sprintf("- 127.0.0.1:%d:9092/tcp", port))
		require.Contains(t, out, fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d,INTERNAL://broker-%d:9093", port, i))
	}
	require.Contains(t, out, "- 127.0.0.1:19004:9090/tcp")

	// The scale-out's file adds broker 3 the same way, and swaps
	// Prometheus's configuration for one that scrapes four brokers.
	out, err = compose(ctx, t, append(env, "BROKER3_PORT=19005"), "-f", "compose.broker-3.yaml", "config")
	require.NoError(t, err)
	require.Contains(t, out, "- 127.0.0.1:19005:9092/tcp")
	require.Contains(t, out, "advertised.listeners=PLAINTEXT://127.0.0.1:19005,INTERNAL://broker-3:9093")
	require.Contains(t, out, "broker.id=3")
	require.Regexp(t, `prometheus\.broker-3\.yml:/etc/prometheus/prometheus\.yml:ro`, out)
	require.NotContains(t, out, "/prometheus.yml:/etc/prometheus/prometheus.yml")
}

// cluster is a running Compose project of compose.yaml.
type cluster struct {
	project string
	env     []string // the host ports, as BROKERn_PORT=...
	addrs   []string // each broker's PLAINTEXT address on 127.0.0.1, by id
	prom    string   // Prometheus's address on 127.0.0.1
}

// up starts compose.yaml as a project of its own on free host ports.
// Everything it made (containers, network, volumes) is removed at the
// test's cleanup, after printing the end of every service's log if the
// test failed.
func up(t *testing.T) *cluster {
	t.Helper()
	removeLeftovers(t)
	c := &cluster{project: projectPrefix + strconv.Itoa(os.Getpid())}
	for i := range brokers {
		port := freePort(t)
		c.env = append(c.env, fmt.Sprintf("BROKER%d_PORT=%d", i, port))
		c.addrs = append(c.addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	port := freePort(t)
	c.env = append(c.env, fmt.Sprintf("PROMETHEUS_PORT=%d", port))
	c.prom = fmt.Sprintf("127.0.0.1:%d", port)

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			out, _ := compose(ctx, t, c.env, "-p", c.project, "logs", "--no-color", "--tail", "40")
			t.Logf("the last lines of each service's log:\n%s", out)
		}
		if _, err := compose(ctx, t, c.env, "-p", c.project, "down", "-v", "--timeout", "10"); err != nil {
			t.Errorf("remove the cluster: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := compose(ctx, t, c.env, "-p", c.project, "up", "-d")
	require.NoError(t, err, "build the images with `make images`")
	return c
}

// freePort is a port on 127.0.0.1 that nothing listens on.
func freePort(t *testing.T) int {
	port, err := zktest.FreePort()
	require.NoError(t, err)
	return port
}

// removeLeftovers takes down the projects of test processes that died
// before their cleanup, found by their project label.
func removeLeftovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	projects := map[string]bool{}
	for _, kind := range [][]string{{"ps", "-a"}, {"volume", "ls"}, {"network", "ls"}} {
		args := append(kind, "--filter", "label=com.docker.compose.project",
			"--format", `{{.Label "com.docker.compose.project"}}`)
		out, err := exec.CommandContext(ctx, "docker", args...).Output()
		require.NoError(t, err, "docker %s", strings.Join(args, " "))
		for _, p := range strings.Fields(string(out)) {
			projects[p] = true
		}
	}
	for p := range projects {
		pid, err := strconv.Atoi(strings.TrimPrefix(p, projectPrefix))
		if !strings.HasPrefix(p, projectPrefix) || err != nil || alive(pid) {
			continue
		}
		t.Logf("removing %s, left by a test process that is gone", p)
		if _, err := compose(ctx, t, nil, "-p", p, "down", "-v", "--timeout", "0"); err != nil {
			t.Logf("remove %s: %v", p, err)
		}
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// metadata asks the broker at addr alone (a new client's first request
// goes to its seed) which brokers the cluster has, by address.
func metadata(ctx context.Context, addr string) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range resp.Brokers {
		out = append(out, fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
	slices.Sort(out)
	return out, nil
}

// TestComposeFileRunsACluster: `docker-compose up -d` on compose.yaml
// starts a cluster in which every broker knows all three by the
// addresses published on 127.0.0.1, a topic replicated three times with
// min.insync.replicas=2 takes acks=all writes and gives them back, and
// Prometheus scrapes every broker.
func TestComposeFileRunsACluster(t *testing.T) {
	c := up(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for i, name := range brokers {
		out, err := compose(ctx, t, c.env, "-p", c.project, "port", name, "9092")
		require.NoError(t, err)
		require.Equal(t, c.addrs[i], strings.TrimSpace(out), "%s's PLAINTEXT port, on the loopback only", name)
	}
	want := slices.Sorted(slices.Values(c.addrs))
	for _, addr := range c.addrs {
		var last any
		require.Eventually(t, func() bool {
			got, err := metadata(ctx, addr)
			last = got
			if err != nil {
				last = err
			}
			return err == nil && slices.Equal(got, want)
		}, 90*time.Second, 500*time.Millisecond, "the broker at %s lists all three (last answer: %v)", addr, &last)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.DefaultProduceTopic("orders"),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	topics, err := adm.ListTopics(ctx, "orders")
	require.NoError(t, err)
	for _, p := range topics["orders"].Partitions {
		require.Len(t, p.Replicas, 3, "partition %d has a replica on each broker", p.Partition)
	}

	var values []string
	for i := range 300 {
		values = append(values, fmt.Sprintf("order %03d", i))
	}
	// The first write waits until every partition has a leader and two
	// replicas in sync; kgo's default is acks=all.
	require.Eventually(t, func() bool {
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte(values[0])}).FirstErr() == nil
	}, 60*time.Second, 200*time.Millisecond, "an acks=all write is accepted")
	var recs []*kgo.Record
	for _, v := range values[1:] {
		recs = append(recs, &kgo.Record{Value: []byte(v)})
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	var got []string
	for len(got) < len(values) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(got), len(values))
		for _, e := range fs.Errors() {
			t.Logf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.ElementsMatch(t, values, got)

	require.Eventually(t, func() bool {
		up, err := promQuery(c.prom, `sum(up{job="kafka"})`)
		return err == nil && up == "3"
	}, 60*time.Second, time.Second, "Prometheus scrapes all three brokers")
}

// promQuery asks Prometheus at addr for a query whose answer is one
// number, and returns it as Prometheus writes it.
func promQuery(addr, q string) (string, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	if len(body.Data.Result) != 1 {
		return "", fmt.Errorf("%d samples", len(body.Data.Result))
	}
	v, _ := body.Data.Result[0].Value[1].(string)
	return v, nil
}
