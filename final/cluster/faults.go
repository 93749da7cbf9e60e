package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Kill sends SIGKILL to a container's process (kill -9): no controlled
// shutdown, no flush; the container stays, stopped, with its volume.
func (c *Cluster) Kill(ctx context.Context, name string) error {
	_, err := c.cli.ContainerKill(ctx, name, client.ContainerKillOptions{Signal: "KILL"})
	return wrap("kill", name, err)
}

// Stop sends SIGTERM and waits up to 30 s for the process to exit: a
// broker's controlled shutdown (it hands its leaderships over first).
func (c *Cluster) Stop(ctx context.Context, name string) error {
	timeout := 30
	_, err := c.cli.ContainerStop(ctx, name, client.ContainerStopOptions{Timeout: &timeout})
	return wrap("stop", name, err)
}

// Start starts a stopped or killed container again, with its volume and
// published port. It does not wait: WaitBroker or WaitZooKeeper does.
func (c *Cluster) Start(ctx context.Context, name string) error {
	_, err := c.cli.ContainerStart(ctx, name, client.ContainerStartOptions{})
	return wrap("start", name, err)
}

// Pause sends SIGSTOP to a container's process (its PID 1, which a signal
// from outside its PID namespace stops): frozen as by a long GC pause,
// its connections open and silent. Resume sends SIGCONT.
func (c *Cluster) Pause(ctx context.Context, name string) error {
	_, err := c.cli.ContainerKill(ctx, name, client.ContainerKillOptions{Signal: "STOP"})
	return wrap("pause", name, err)
}

// Resume sends SIGCONT to a paused container's process.
func (c *Cluster) Resume(ctx context.Context, name string) error {
	_, err := c.cli.ContainerKill(ctx, name, client.ContainerKillOptions{Signal: "CONT"})
	return wrap("resume", name, err)
}

// Disconnect takes a container off the cluster's network: it reaches no
// broker and no ZooKeeper server, and no client reaches it (its published
// port is on that network too). Connect puts it back, under the same name.
func (c *Cluster) Disconnect(ctx context.Context, name string) error {
	_, err := c.cli.NetworkDisconnect(ctx, c.network, client.NetworkDisconnectOptions{Container: name, Force: true})
	return wrap("disconnect", name, err)
}

// Connect puts a disconnected container back on the cluster's network.
func (c *Cluster) Connect(ctx context.Context, name string) error {
	_, err := c.cli.NetworkConnect(ctx, c.network, client.NetworkConnectOptions{Container: name,
		EndpointConfig: &network.EndpointSettings{Aliases: []string{name}}})
	return wrap("connect", name, err)
}

// Cut drops every packet between container from and each of the others,
// both ways, with iptables rules in from's network namespace (entered
// with nsenter from the host: a broker's image has no iptables, nor a
// shell). Everything else from reaches is untouched: cut a partition
// leader from its followers only and it still holds its ZooKeeper
// session, stays leader, and sees its followers fall out of the ISR.
// Heal removes every cut.
func (c *Cluster) Cut(ctx context.Context, from string, others ...string) error {
	pid, err := c.pid(ctx, from)
	if err != nil {
		return err
	}
	for _, o := range others {
		ip, err := c.ip(ctx, o)
		if err != nil {
			return err
		}
		for _, rule := range [][]string{{"INPUT", "-s", ip}, {"OUTPUT", "-d", ip}} {
			args := []string{"-t", pid, "-n", "iptables", "-w", "-I", rule[0], rule[1], rule[2], "-j", "DROP"}
			if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("cluster: cut %s from %s: nsenter %s: %v: %s (Cut needs root, nsenter and iptables)",
					from, o, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}

// Heal removes every Cut of every running container.
func (c *Cluster) Heal(ctx context.Context) error {
	for _, n := range append(c.Brokers(), c.ZooKeepers()...) {
		pid, err := c.pid(ctx, n.Name)
		if err != nil || pid == "0" {
			continue // not running: its namespace, and rules, are gone
		}
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			if out, err := exec.CommandContext(ctx, "nsenter", "-t", pid, "-n", "iptables", "-w", "-F", chain).CombinedOutput(); err != nil {
				return fmt.Errorf("cluster: heal %s: %v: %s", n.Name, err, strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}

// pid is the host's process id of a running container's PID 1.
func (c *Cluster) pid(ctx context.Context, name string) (string, error) {
	in, err := c.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return "", wrap("inspect", name, err)
	}
	if in.Container.State == nil || !in.Container.State.Running {
		return "0", fmt.Errorf("cluster: %s is not running", name)
	}
	return strconv.Itoa(in.Container.State.Pid), nil
}

// ip is a container's address on the cluster's network.
func (c *Cluster) ip(ctx context.Context, name string) (string, error) {
	in, err := c.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return "", wrap("inspect", name, err)
	}
	if in.Container.NetworkSettings != nil {
		if ep := in.Container.NetworkSettings.Networks[c.network]; ep != nil && ep.IPAddress.IsValid() {
			return ep.IPAddress.String(), nil
		}
	}
	return "", fmt.Errorf("cluster: %s has no address on %s", name, c.network)
}

// Running reports whether a container runs (a paused one does too).
func (c *Cluster) Running(ctx context.Context, name string) (bool, error) {
	in, err := c.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return false, wrap("inspect", name, err)
	}
	return in.Container.State != nil && in.Container.State.Running, nil
}

func wrap(verb, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cluster: %s %s: %w", verb, name, err)
}
