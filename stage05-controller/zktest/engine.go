package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// DefaultImage is the ZooKeeper image the harness runs: ZooKeeper 3.8.0 from
// Debian bookworm, built by `make images` (scripts/images.sh builds the same
// tag). Set ZKTEST_IMAGE to run another one.
const DefaultImage = "kafkaworkbook/zookeeper:3.8.0"

// ImageEnv names the environment variable that overrides DefaultImage.
const ImageEnv = "ZKTEST_IMAGE"

// buildHint tells a reader how to get the images; every image error ends
// with it.
const buildHint = "build the images with `make images` (scripts/images.sh) from the repository root"

// Image returns the ZooKeeper image the harness runs.
func Image() string {
	if img := os.Getenv(ImageEnv); img != "" {
		return img
	}
	return DefaultImage
}

// engine is the process-wide connection to the Docker engine, made once by
// dockerEngine.
var engine struct {
	once   sync.Once
	client *testcontainers.DockerClient // nil when err is set
	err    error                        // why the engine is unusable
}

// dockerEngine returns the Docker engine client, or fails the test with a
// message that says what is missing.
func dockerEngine(t testing.TB) *testcontainers.DockerClient {
	t.Helper()
	engine.once.Do(func() {
		// testcontainers reads its configuration once, at its first call,
		// so these go first. Ryuk, its reaper container, would have to be
		// pulled from a registry we cannot reach; t.Cleanup removes what
		// the tests start instead. The host override stops testcontainers
		// from guessing the Docker host from the default gateway, which on
		// these machines is another machine: every port we publish is on
		// 127.0.0.1, and no test traffic may leave this host.
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			engine.err = engineError(defaultEngineHost(), err)
			return
		}
		engine.client = cli
		removeLeftovers(ctx, t, cli)
	})
	if engine.err != nil {
		t.Fatal(engine.err)
	}
	return engine.client
}

// engineError explains an unreachable engine at host.
func engineError(host string, err error) error {
	return fmt.Errorf("zktest: no Docker engine at %s (%w): these tests run ZooKeeper in containers; "+
		"start the engine, then %s", host, err, buildHint)
}

// defaultEngineHost is where a Docker client looks for the engine.
func defaultEngineHost() string {
	if host := os.Getenv("DOCKER_HOST"); host != "" {
		return host
	}
	return "unix:///var/run/docker.sock"
}

// ErrImageMissing reports that the engine does not have an image the harness
// needs. It is never pulled: no registry is reachable from these machines.
var ErrImageMissing = errors.New("zktest: image not in the Docker engine")

// imageInspector is the part of the Docker client checkImage needs.
type imageInspector interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	DaemonHost() string
}

// checkImage returns nil when the engine has image, or an error that names
// the make target that builds it.
func checkImage(ctx context.Context, cli imageInspector, image string) error {
	_, err := cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		err := fmt.Errorf("%w: %s; %s", ErrImageMissing, image, buildHint)
		if os.Getenv(ImageEnv) != "" {
			err = fmt.Errorf("%w (the image was chosen by %s; unset it for %s)", err, ImageEnv, DefaultImage)
		}
		return err
	default:
		return engineError(cli.DaemonHost(), fmt.Errorf("inspect image %s: %w", image, err))
	}
}

// requireImage fails the test unless the engine has image. It runs before
// any container is created, because testcontainers would otherwise try to
// pull a missing image from a registry.
func requireImage(t testing.TB, cli imageInspector, image string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := checkImage(ctx, cli, image); err != nil {
		t.Fatal(err)
	}
}
