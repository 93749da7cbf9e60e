package zktest

import (
	"fmt"
	"strings"
	"time"
)

// Timing. ZooKeeper derives every timeout from tickTime, so one constant
// sets the pace of a whole test.
const (
	// TickTime is the servers' tickTime. ZooKeeper's default is 2 s; at
	// 500 ms every tick-based timeout below is four times shorter.
	TickTime = 500 * time.Millisecond

	// SessionTimeout is the session timeout Connect asks for. A server
	// grants between 2 and 20 ticks (1 s to 10 s here). Kafka's
	// zookeeper.session.timeout.ms is 18 s (6 s before 2.5); 4 s keeps
	// expiry tests short and still leaves the client time to notice a dead
	// connection (after 2/3 of the timeout) and reconnect elsewhere before
	// the session is gone.
	SessionTimeout = 4 * time.Second

	// initLimit is how many ticks a follower may take to connect to a new
	// leader and sync with it (5 s); the tests' trees are tiny.
	initLimit = 10

	// syncLimit is how many ticks a follower may lag before the leader
	// drops it, and how long a follower waits on a silent leader (2 s).
	// It decides how fast a killed, paused or cut-off node is noticed.
	syncLimit = 4
)

// clientPort is the port ZooKeeper serves clients on inside every container.
const clientPort = 2181

// hostname is node i's name on its ensemble's network (zk1, zk2, ...).
// ZooKeeper numbers servers from 1 (server.N and myid), the harness's
// indexes from 0.
func hostname(i int) string { return fmt.Sprintf("zk%d", i+1) }

// zooCfg renders zoo.cfg for an ensemble whose servers have the addresses
// (or host names) given; with one server it has no server lines and
// QuorumPeerMain runs a standalone server.
func zooCfg(servers []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", TickTime.Milliseconds())
	fmt.Fprintf(&b, "initLimit=%d\nsyncLimit=%d\n", initLimit, syncLimit)
	fmt.Fprintf(&b, "dataDir=/data\nclientPort=%d\n", clientPort)
	// Jetty is on the image's classpath; nothing here uses the admin server
	// and it would take port 8080.
	b.WriteString("admin.enableServer=false\n")
	// srvr is the readiness probe; mntr and cons help when reading a failure
	// by hand (echo cons | nc 127.0.0.1 PORT).
	b.WriteString("4lw.commands.whitelist=srvr,stat,mntr,cons,ruok\n")
	if len(servers) > 1 {
		// Bind the quorum and election ports on every interface, so that
		// a server taken off the network and put back listens again
		// whatever happened to its interface meanwhile.
		b.WriteString("quorumListenOnAllIPs=true\n")
		// Addresses, not names: they are fixed (see ensembleNetwork), and
		// ZooKeeper would resolve names once anyway, and before the later
		// servers' containers exist.
		for i, addr := range servers {
			fmt.Fprintf(&b, "server.%d=%s:2888:3888\n", i+1, addr)
		}
	}
	return b.String()
}

// serverCommand is the container's command after the image's entry point
// (java -cp zookeeper.jar...): JVM settings, then the server's main class.
func serverCommand() []string {
	return []string{
		// A test server holds a few znodes; keep three JVMs small, and
		// start them fast (C1 only, serial GC).
		"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true",
		// Connecting to a peer that is gone (killed, cut off) times out
		// after 1 s instead of 5 s, so elections do not wait on it.
		"-Dzookeeper.cnxTimeout=1000",
		// A server looking for a leader re-sends its vote after doubling
		// waits that reach 60 s by default: a node that has been alone for
		// a minute would take up to a minute to notice its peers are back.
		"-Dzookeeper.fastleader.maxNotificationInterval=2000",
		// The readiness probe sends srvr many times a second; do not log
		// each one, or a failed test's log tail shows nothing else.
		"-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.NIOServerCnxn=warn",
		"-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.command=warn",
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", "/conf/zoo.cfg",
	}
}
