// Package zktest runs real ZooKeeper servers in Docker containers for tests,
// and breaks them on demand.
//
// Kafka's controller (seed §1.1) is built on three ZooKeeper guarantees:
// an ephemeral znode lives exactly as long as its creator's session, a watch
// fires once when the znode it watches changes, and writes need a majority
// of the ensemble. Stage 05 and the final broker rely on all three, so their
// tests run against the real thing rather than a fake, and this package is
// the vocabulary those tests are written in:
//
//	ens := zktest.StartEnsemble(t, 3)      // three servers, serving
//	c := zktest.Connect(t, ens.Addrs())     // a session, closed at cleanup
//	ens.Kill(ens.Leader())                  // SIGKILL the leader
//	ens.Pause(1)                            // freeze a server (a long GC pause)
//	ens.Disconnect(2)                       // take a server off the network
//	p := zktest.StartProxy(t, ens.Addr(0))  // a client path a test can cut
//	p.Cut()                                 // a partition: bytes stop, nothing closes
//
// Every container and network is removed in t.Cleanup, also when the test
// fails; a failed test first prints the tail of each server's log.
//
// # Images
//
// The machines this workbook runs on reach no container registry, so the
// ZooKeeper image is built locally from Debian's packages by `make images`
// (scripts/images.sh) and never pulled. A missing image or Docker engine
// fails the test with a message that says so and names `make images`; tests
// never skip, so CI cannot pass by testing nothing. ZKTEST_IMAGE overrides
// the image (DefaultImage).
//
// # Time
//
// ZooKeeper counts in ticks. Its default tick is 2 s, which makes a session
// expire in tens of seconds and a failed leader's replacement take about as
// long. The servers here tick every 500 ms (TickTime) and clients ask for
// 4 s sessions (SessionTimeout), so a test that waits for an expiry waits
// seconds. The rules are the same, only the clock is faster; see config.go
// for each setting and its reason.
//
// # Readiness
//
// A server is ready when it answers ZooKeeper's four-letter word "srvr"
// with a "Mode:" line (leader, follower or standalone). An open port is not
// enough: Docker's port proxy accepts connections before ZooKeeper does, and
// a server without a quorum accepts them too but serves nothing.
package zktest
