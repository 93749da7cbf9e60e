// Package cluster runs several stage 03 brokers in one process on
// 127.0.0.1, and a Controller that plays the part stage 05's controller will
// take: it assigns partitions, chooses leaders, bumps leader epochs, and
// tells the brokers with Kafka's own LeaderAndIsr, UpdateMetadata and
// StopReplica requests, sent over the network like any other request.
//
// Tests read like the stories they check:
//
//	c := cluster.Start(3, opts)
//	c.Controller.CreateTopic("orders", 1, 3)
//	c.StopBroker(0)                  // a clean shutdown
//	c.Controller.ElectLeader(tp, 1)  // leader epoch + 1
//	c.CrashBroker(2, cluster.Crash{LoseAfter: ...})
//	c.StartBroker(2)
//	c.Controller.BrokerStarted(2)    // it learns its roles again
//
// Stage 04 reuses the harness through three Options, each nil by default:
// NewServer builds each broker (stage 04's own, which embeds a
// *server.Server); States is the StateStore holding partition states, which
// stage 04's leaders also write ISR changes to, so the controller loads a
// state before each decision and writes on condition of the partition
// epoch it loaded, retrying on a conflict, as Kafka's controller does with
// the state znodes; Elect is the leader election policy after a failure or
// a start (FirstLiveReplica by default, Kafka's ISR rule in stage 04). And
// Controller.UpdateMetadata tells every broker the ISRs leaders wrote, as
// Kafka's controller does on an ISR change notification.
//
// cmd/cluster uses the same pieces for its interactive demo.
package cluster
