package clustertest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// spec is a container to run on an ensemble's network: everything but
// what startContainer fills in (the network, the name as host name, the
// labels, the loopback port binding).
type spec struct {
	name          string
	image         string
	containerPort int
	// request completes the request once the host address is known
	// (a broker advertises it).
	request func(req *testcontainers.ContainerRequest, hostAddr string)
}

// startContainer starts s on ens's network as host s.name, with
// s.containerPort published on a free 127.0.0.1 port (loopback only:
// nothing outside this machine reaches a test container), labelled so
// that zktest removes it if this process dies first. It returns the
// container (removed at the test's cleanup by the caller's remove, or at
// once, with failedStart, when it did not start) and the host address; a port taken between our check and Docker's bind is
// tried again with another.
func startContainer(t testing.TB, ens *zktest.Ensemble, s spec, remove func(c testcontainers.Container, failedStart bool)) (testcontainers.Container, string, error) {
	t.Helper()
	var lastErr error
	for range 3 {
		port, err := zktest.FreePort()
		if err != nil {
			return nil, "", err
		}
		hostAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		exposed := fmt.Sprintf("%d/tcp", s.containerPort)
		req := testcontainers.ContainerRequest{
			Image:          s.image,
			Name:           s.name,
			ExposedPorts:   []string{exposed},
			Networks:       []string{ens.Network()},
			NetworkAliases: map[string][]string{ens.Network(): {s.name}},
			Labels:         zktest.Labels(t),
			ConfigModifier: func(c *container.Config) { c.Hostname = s.name },
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.PortBindings = network.PortMap{network.MustParsePort(exposed): {{
					HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}}}
			},
		}
		s.request(&req, hostAddr)
		c, err := testcontainers.GenericContainer(context.Background(),
			testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true, Logger: tclog.TestLogger(t)})
		if err == nil {
			t.Cleanup(func() { remove(c, false) })
			return c, hostAddr, nil
		}
		if c != nil {
			remove(c, true)
		}
		lastErr = err
		if !strings.Contains(err.Error(), "already allocated") && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, "", lastErr
}

// terminate removes a container at once, for cleanup.
func terminate(t testing.TB, c testcontainers.Container, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil {
		t.Logf("clustertest: remove %s: %v", name, err)
	}
}
