package zktest

import "context"

// The servers a test starts are the ones a launcher outside a test starts
// too (final/cluster, behind `make cluster` and the fault suite): the same
// image, zoo.cfg and JVM settings, so that what the tests measured is what
// a reader runs. These three functions are that seam.

// ZooCfg renders the zoo.cfg of an ensemble whose servers have the
// addresses or host names given, in myid order (server.1 first), with the
// harness's short ticks (see TickTime); one server: a standalone server.
// ZooKeeper 3.8 resolves a host name again when a connection to it fails,
// so names of containers started one after another work.
func ZooCfg(servers []string) string { return zooCfg(servers) }

// ServerCommand is the container command (after the image's entry point)
// that runs a server from /conf/zoo.cfg, with the harness's JVM settings.
func ServerCommand() []string { return serverCommand() }

// ServerMode asks the server at addr (its client port) for its mode:
// "leader", "follower" or "standalone" while it serves clients, an error
// otherwise.
func ServerMode(ctx context.Context, addr string) (string, error) { return serverMode(ctx, addr) }
