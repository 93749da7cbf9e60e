// Package cluster starts, breaks and removes a cluster of the final broker
// in Docker containers: ZooKeeper servers, brokers and Prometheus on one
// user-defined network, each broker's data and each ZooKeeper server's on a
// named volume. It is the launcher behind `make cluster` and `make run`
// (final/cmd/cluster), and the one the tests and the fault suite use
// (final/clustertest, final/faults), so that what they break is what a
// reader runs.
//
//	c, err := cluster.Up(ctx, cluster.Config{Name: "demo"}) // 3 ZooKeeper, 3 brokers
//	c.Kill(ctx, c.Broker(1).Name)                          // kill -9 of broker 1
//	c.Cut(ctx, c.Broker(0).Name, c.Broker(1).Name)         // 0 and 1 no longer reach each other
//	c.Heal(ctx)                                            // every cut undone
//	cluster.Down(ctx, "demo")                               // containers, network, volumes: gone
//
// # Naming
//
// Everything carries the label org.kafkaworkbook.cluster=<name>, so that
// Down and Attach find it from another process (`make cluster-down` after
// `make cluster`): the network is <name>, the containers
// <name>-zookeeper-<myid>, <name>-broker-<id> and <name>-prometheus (a
// container's name is also its host name on the network), the volumes
// <name>-zookeeper-<myid>-data and <name>-broker-<id>-data.
//
// # Listeners
//
// A broker has two listeners, as in final/clustertest's first version and
// docs/operations.md: PLAINTEXT (container port 9092), published on a
// 127.0.0.1 port and advertised there, for clients on this machine; and
// INTERNAL (9093), advertised as the container's name, for the other
// brokers and its own controller, which cannot reach this machine's
// loopback from inside a container.
//
// # Faults
//
// Kill (SIGKILL), Stop (SIGTERM: a controlled shutdown), Start, Pause and
// Resume (SIGSTOP and SIGCONT to the broker or ZooKeeper process, the
// container's PID 1: a process frozen as by a long GC pause), Disconnect
// and Connect (docker network disconnect: a node cut from everything) and
// Cut and Heal (iptables rules inside a container's network namespace,
// entered with nsenter from the host: a node cut from some peers only, such
// as a leader from its followers while it still reaches ZooKeeper). Cut
// needs root, nsenter and iptables on the machine running the launcher.
package cluster
