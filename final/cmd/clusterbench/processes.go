package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// brokerPackage is the final broker's command, built once per run for
// --brokers processes.
const brokerPackage = "github.com/kafkaworkbook/workbook/final/cmd/broker"

// processes are the final broker's three brokers run as processes on this
// machine, for --brokers processes: the same binary, settings and
// ZooKeeper ensemble (in containers, as with --brokers containers), but
// the brokers listen on 127.0.0.1 themselves. The clients' bytes then
// cross no Docker proxy, no bridge and no network namespace: what is left
// is the brokers' own cost, which the two runs side by side separate from
// Docker's.
type processes struct {
	dir     string // the binary, each broker's log directory and output
	addrs   []string
	cmds    []*exec.Cmd
	exited  []chan struct{}
	outputs []string
}

// startProcesses builds the broker and starts n brokers on zk (the
// ensemble's 127.0.0.1 addresses), with cluster.DefaultBrokerProps and env
// added to their environment, and waits until each lists all n in its
// metadata.
func startProcesses(ctx context.Context, zk []string, n int, env []string) (*processes, error) {
	dir, err := os.MkdirTemp("", "clusterbench-brokers-")
	if err != nil {
		return nil, err
	}
	p := &processes{dir: dir}
	bin := filepath.Join(dir, "broker")
	fmt.Fprintf(stderr, "building %s\n", brokerPackage)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, brokerPackage)
	if out, err := build.CombinedOutput(); err != nil {
		p.stop()
		return nil, fmt.Errorf("go build %s: %w\n%s", brokerPackage, err, out)
	}
	for id := range n {
		port, err := freePort()
		if err != nil {
			p.stop()
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		settings := maps.Clone(cluster.DefaultBrokerProps)
		maps.Copy(settings, map[string]string{
			"broker.id":         strconv.Itoa(id),
			"zookeeper.connect": strings.Join(zk, ","),
			"listeners":         "PLAINTEXT://" + addr,
			"log.dirs":          filepath.Join(dir, fmt.Sprintf("broker-%d", id)),
			// Three processes cannot share the containers' metrics port;
			// clusterbench reads /proc, not the metrics.
			"metrics.prometheus.listener": "",
		})
		var args []string
		for _, k := range slices.Sorted(maps.Keys(settings)) {
			args = append(args, "--override", k+"="+settings[k])
		}
		out := filepath.Join(dir, fmt.Sprintf("broker-%d.log", id))
		f, err := os.Create(out)
		if err != nil {
			p.stop()
			return nil, err
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = dieWithParent()
		if err := cmd.Start(); err != nil {
			f.Close()
			p.stop()
			return nil, fmt.Errorf("start broker %d: %w", id, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); f.Close(); close(exited) }()
		p.addrs, p.cmds, p.exited, p.outputs = append(p.addrs, addr), append(p.cmds, cmd), append(p.exited, exited), append(p.outputs, out)
		fmt.Fprintf(stderr, "broker %d: pid %d, PLAINTEXT on %s\n", id, cmd.Process.Pid, addr)
	}
	if err := p.wait(ctx, n); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// freePort is a port of 127.0.0.1 nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// wait waits until every broker answers Metadata listing n brokers.
func (p *processes) wait(ctx context.Context, n int) error {
	deadline := time.Now().Add(time.Minute)
	for i, addr := range p.addrs {
		for {
			select {
			case <-p.exited[i]:
				return fmt.Errorf("broker %d exited at start; its output: %s\n%s", i, p.outputs[i], tail(p.outputs[i], 20))
			default:
			}
			if md, err := cluster.BrokerMetadata(ctx, addr); err == nil && len(md.Brokers) == n {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("broker %d on %s: not ready within a minute; its output: %s\n%s", i, addr, p.outputs[i], tail(p.outputs[i], 20))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// pids are the brokers' process ids, for the CPU meter.
func (p *processes) pids() []int {
	var out []int
	for _, c := range p.cmds {
		out = append(out, c.Process.Pid)
	}
	return out
}

// stop ends every broker (SIGTERM, a controlled shutdown; SIGKILL after
// 30 s) and removes the directory.
func (p *processes) stop() {
	for _, c := range p.cmds {
		c.Process.Signal(syscall.SIGTERM)
	}
	for i, c := range p.cmds {
		select {
		case <-p.exited[i]:
		case <-time.After(30 * time.Second):
			fmt.Fprintf(stderr, "broker %d: no exit 30 s after SIGTERM; killing it\n", i)
			c.Process.Kill()
			<-p.exited[i]
		}
	}
	if err := os.RemoveAll(p.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(stderr, err)
	}
}
