package zktest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/moby/moby/client"
)

// pidLabel holds the process id of the test binary that created a
// container or network.
const pidLabel = Label + ".pid"

// labels are put on every container and network the harness creates for t:
// the test's name, to tell a reader whose it is, and the process's id, to
// tell removeLeftovers whether its owner is still alive.
func labels(t testing.TB) map[string]string {
	return map[string]string{Label: t.Name(), pidLabel: strconv.Itoa(os.Getpid())}
}

// Labels are the labels a container another harness starts on an
// ensemble's network should carry (final's broker containers): the next
// test process removes it if this one dies before its cleanups run, as it
// removes the ensemble's own.
func Labels(t testing.TB) map[string]string { return labels(t) }

// removeLeftovers removes the containers and networks of test processes
// that died before their cleanups ran (killed, or panicked on -timeout).
// Left alone, their servers would run until the machine goes, and their
// networks hold subnets from Docker's small pool (about thirty) until no
// new network can be created. What belongs to a live process stays: the
// tests of other packages may be running at the same time.
func removeLeftovers(ctx context.Context, t testing.TB, cli client.APIClient) {
	owned := make(client.Filters).Add("label", pidLabel)
	containers, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: owned})
	if err != nil {
		t.Logf("zktest: list leftover containers: %v", err)
		return
	}
	for _, c := range containers.Items {
		if processAlive(c.Labels[pidLabel]) {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Logf("zktest: remove leftover container %s: %v", c.ID[:12], err)
			continue
		}
		t.Logf("zktest: removed container %s left by %s (process %s, gone)", c.ID[:12], c.Labels[Label], c.Labels[pidLabel])
	}
	networks, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: owned})
	if err != nil {
		t.Logf("zktest: list leftover networks: %v", err)
		return
	}
	for _, n := range networks.Items {
		if processAlive(n.Labels[pidLabel]) {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
			t.Logf("zktest: remove leftover network %s: %v", n.Name, err)
			continue
		}
		t.Logf("zktest: removed network %s left by %s (process %s, gone)", n.Name, n.Labels[Label], n.Labels[pidLabel])
	}
}

// processAlive reports whether the process with the id given runs on this
// machine. In doubt (no id, no permission to ask), it says yes.
func processAlive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return true
	}
	err = syscall.Kill(n, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// OwnerGone reports whether the labels (Labels' of some test) name a
// test process that no longer runs: what it left is anyone's to remove.
func OwnerGone(labels map[string]string) bool {
	pid, ok := labels[pidLabel]
	return ok && !processAlive(pid)
}
