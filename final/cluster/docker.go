package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// Labels on everything the launcher makes.
const (
	// Label holds the cluster's name: Down and Attach find its parts by it.
	Label     = "org.kafkaworkbook.cluster"
	roleLabel = Label + ".role" // zookeeper, broker, prometheus
	idLabel   = Label + ".id"   // broker id, ZooKeeper myid
)

// engine connects to the Docker engine (DOCKER_HOST or the local socket),
// speaking the engine's API version (20.10 speaks 1.41).
func engine() (*client.Client, error) {
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("cluster: Docker client: %w", err)
	}
	if _, err := cli.Ping(context.Background(), client.PingOptions{}); err != nil {
		host := os.Getenv("DOCKER_HOST")
		if host == "" {
			host = "unix:///var/run/docker.sock"
		}
		return nil, fmt.Errorf("cluster: no Docker engine at %s (%w): the cluster runs in containers; install Docker and start its engine", host, err)
	}
	return cli, nil
}

// requireImage fails unless the engine has image: nothing is ever pulled
// (no registry is reachable from the machines this runs on).
func requireImage(ctx context.Context, cli *client.Client, image string) error {
	_, err := cli.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("cluster: image %s is not in the Docker engine; build the images with `make images`", image)
	}
	if err != nil {
		return fmt.Errorf("cluster: inspect image %s: %w", image, err)
	}
	return nil
}

// containerSpec is one container to create on the cluster's network.
type containerSpec struct {
	name, role string
	id         int
	image      string
	cmd        []string
	port       int    // container port published on hostPort of 127.0.0.1
	hostPort   int    // zero: a free port
	volume     string // a named volume mounted at volumePath
	volumePath string
	files      map[string]string // container path -> content, copied in before start
	sysctls    map[string]string
	// request completes the spec once the host port is known.
	request func(s *containerSpec, hostAddr string)
}

// create creates and starts s, publishing its port on 127.0.0.1 only
// (nothing outside this machine reaches a cluster container); a free port
// taken by someone else between our check and Docker's bind is tried again
// with another. It returns the host address.
func (c *Cluster) create(ctx context.Context, s containerSpec) (string, error) {
	labels := map[string]string{Label: c.cfg.Name, roleLabel: s.role, idLabel: strconv.Itoa(s.id)}
	for k, v := range c.cfg.Labels {
		labels[k] = v
	}
	if s.volume != "" {
		if _, err := c.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: s.volume, Labels: labels}); err != nil {
			return "", fmt.Errorf("cluster: create volume %s: %w", s.volume, err)
		}
	}
	var lastErr error
	for range 3 {
		port := s.hostPort
		if port == 0 {
			p, err := zktest.FreePort()
			if err != nil {
				return "", err
			}
			port = p
		}
		hostAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		spec := s
		if s.request != nil {
			s.request(&spec, hostAddr)
		}
		exposed := network.MustParsePort(fmt.Sprintf("%d/tcp", s.port))
		hc := &container.HostConfig{
			PortBindings: network.PortMap{exposed: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}}},
			Sysctls:      spec.sysctls,
		}
		if spec.volume != "" {
			hc.Mounts = []mount.Mount{{Type: mount.TypeVolume, Source: spec.volume, Target: spec.volumePath}}
		}
		created, err := c.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: spec.name,
			Config: &container.Config{
				Image: spec.image, Cmd: spec.cmd, Hostname: spec.name, Labels: labels,
				ExposedPorts: network.PortSet{exposed: {}},
			},
			HostConfig: hc,
			NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
				c.network: {Aliases: []string{spec.name}},
			}},
		})
		if err != nil {
			return "", fmt.Errorf("cluster: create %s: %w", spec.name, err)
		}
		for path, content := range spec.files {
			if err := copyFile(ctx, c.cli, created.ID, path, content); err != nil {
				return "", fmt.Errorf("cluster: copy %s into %s: %w", path, spec.name, err)
			}
		}
		_, err = c.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{})
		if err == nil {
			return hostAddr, nil
		}
		lastErr = err
		c.cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
		if s.hostPort != 0 || !(strings.Contains(err.Error(), "already allocated") || strings.Contains(err.Error(), "address already in use")) {
			break
		}
	}
	return "", fmt.Errorf("cluster: start %s: %w", s.name, lastErr)
}

// copyFile writes content at path in a created container (a tar stream
// of one file, as `docker cp` sends).
func copyFile(ctx context.Context, cli *client.Client, id, path, content string) error {
	dir, base := path[:strings.LastIndex(path, "/")+1], path[strings.LastIndex(path, "/")+1:]
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: base, Mode: 0o644, Size: int64(len(content))}); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, content); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dir, Content: &buf})
	return err
}

// Logs returns the last lines of a container's output.
func (c *Cluster) Logs(ctx context.Context, name string, lines int) (string, error) {
	r, err := c.cli.ContainerLogs(ctx, name, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(lines)})
	if err != nil {
		return "", err
	}
	defer r.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, r); err != nil && !errors.Is(err, io.EOF) {
		return out.String(), err
	}
	return out.String(), nil
}
