package zktest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
)

// ensembleNetwork is the user-defined bridge network an ensemble's servers
// talk on, with a subnet of its own.
//
// Every server has a fixed address on it. ZooKeeper resolves its peers'
// addresses when it reads zoo.cfg and keeps them, and Docker gives a
// container that is disconnected and connected again the lowest free
// address, which may be another server's old one: we saw a server keep
// connecting to itself at the address it had been given for a peer. So the
// servers' addresses are chosen here, in the upper half of the subnet, and
// Docker hands out only the lower half to anything else that joins.
type ensembleNetwork struct {
	*testcontainers.DockerNetwork
	subnet netip.Prefix // the whole network
	static netip.Addr   // the first server address, in the upper half
}

// createNetwork creates an ensemble's network, labelled with the test's
// name.
func createNetwork(ctx context.Context, t testing.TB, cli client.APIClient) (*ensembleNetwork, error) {
	var lastErr error
	// Another test may create a network between our finding a free subnet
	// and taking it; then Docker refuses ours and we look again.
	for range 3 {
		subnet, err := freeSubnet(ctx, t, cli)
		if err != nil {
			return nil, err
		}
		lower, upper := halves(subnet)
		nw, err := tcnetwork.New(ctx,
			tcnetwork.WithLabels(labels(t)),
			tcnetwork.WithIPAM(&network.IPAM{
				Driver: "default",
				Config: []network.IPAMConfig{{Subnet: subnet, IPRange: lower}},
			}))
		if err == nil {
			return &ensembleNetwork{DockerNetwork: nw, subnet: subnet, static: upper.Addr()}, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "overlap") {
			break
		}
	}
	return nil, fmt.Errorf("create the ensemble's network: %w", lastErr)
}

// serverAddr is the fixed address of server i.
func (nw *ensembleNetwork) serverAddr(i int) netip.Addr {
	// Skip the first few addresses of the half, for readability only.
	return addAddr(nw.static, uint32(10+i))
}

// freeSubnet asks Docker for a subnet that no network and no route of this
// machine uses: it creates a network without naming one, which makes Docker
// pick one from its address pools, notes it and removes the network.
func freeSubnet(ctx context.Context, t testing.TB, cli client.APIClient) (netip.Prefix, error) {
	created, err := cli.NetworkCreate(ctx, "zktest-subnet-probe-"+rand.Text()[:8], client.NetworkCreateOptions{
		Driver: "bridge",
		Labels: labels(t),
	})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("find a free subnet: %w", err)
	}
	inspected, err := cli.NetworkInspect(ctx, created.ID, client.NetworkInspectOptions{})
	// The probe holds the subnet until it is gone.
	if _, rmErr := cli.NetworkRemove(context.WithoutCancel(ctx), created.ID, client.NetworkRemoveOptions{}); rmErr != nil {
		return netip.Prefix{}, fmt.Errorf("find a free subnet: remove the probe network: %w", rmErr)
	}
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("find a free subnet: %w", err)
	}
	for _, cfg := range inspected.Network.IPAM.Config {
		if cfg.Subnet.Addr().Is4() && cfg.Subnet.Bits() <= 28 {
			return cfg.Subnet.Masked(), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("find a free subnet: Docker gave no IPv4 subnet of 16 addresses or more: %+v", inspected.Network.IPAM.Config)
}

// halves splits an IPv4 subnet into its lower and upper half.
func halves(p netip.Prefix) (lower, upper netip.Prefix) {
	bits := p.Bits() + 1
	lower = netip.PrefixFrom(p.Addr(), bits)
	upper = netip.PrefixFrom(addAddr(p.Addr(), 1<<(32-bits)), bits)
	return lower, upper
}

// addAddr returns the IPv4 address n after a.
func addAddr(a netip.Addr, n uint32) netip.Addr {
	b := a.As4()
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])+n)
	return netip.AddrFrom4(b)
}
