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
// cmd/cluster uses the same pieces for its interactive demo.
package cluster
