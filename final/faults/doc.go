// Package faults breaks a running cluster of the final broker, one fault at
// a time, under a steady write load, and then checks that nothing the
// cluster acknowledged was lost, written twice or reordered, and that its
// replicas agree byte for byte. It is the workbook's version of Kafka's
// system tests (the replication and clean-bounce tests of kafkatest) and
// of a Jepsen run: a workload, a nemesis, a checker, and a report.
//
//	c, _ := cluster.Up(ctx, cluster.Config{Name: "faults-1"})
//	rep, _ := faults.Run(ctx, c, faults.Config{Faults: []faults.Kind{faults.LeaderKill, faults.LeaderCut}})
//	rep.WriteTo(os.Stdout) // Markdown
//
// # The workload
//
// A topic of six partitions, replication factor 3, min.insync.replicas=2.
// Three idempotent producers (franz-go, acks=all) write about 300 records
// a second each, cycling over the partitions; every value is unique, its
// producer and that producer's sequence number ("p1-000004217"). A record
// enters the ledger only when the cluster acknowledged it, with the
// partition and offset it was given; a record that failed is counted as a
// failure and never as acknowledged. The producers retry for ever (a
// record fails only when its client closes), so a fault shows as a wait,
// not as an error. Two consumers in a consumer group read the topic from
// the start and note every value they are given.
//
// Beside it, two franz-go producers with a transactional.id each
// (KIP-98) write to a topic of their own (three partitions, the same
// replication), ten transactions a second each, of four records over the
// partitions ("w1-000042-3": writer, transaction, record). Every fourth
// transaction is aborted on purpose. The ledger keeps every transaction
// with its values and what the writer knows of its end: committed
// (EndTxn(commit) answered), aborted (never asked to commit: on purpose,
// or after a produce failed) or unknown (the commit returned an error:
// the coordinator may have decided either way). A transaction that went
// wrong leaves its client behind: the next begins with a new client,
// whose InitProducerId fences the old epoch and has the coordinator
// finish what it left open.
//
// # The nemesis
//
// Each fault is chosen against one partition and its current leader: kill
// -9 of the leader, of the controller, of a follower; a clean bounce
// (SIGTERM: a controlled shutdown, then a start); SIGSTOP of a leader or a
// follower for longer than zookeeper.session.timeout.ms, as a long GC
// pause would, then SIGCONT; the leader taken off the network (docker
// network disconnect: from the brokers, ZooKeeper and the clients); the
// leader cut from its followers only; one ZooKeeper server killed; two of
// three killed (the ensemble loses its quorum); every broker stopped, then
// every one started. A fault holds until the cluster is seen reacting to
// it (a new leader, a new controller, an ISR without the victim) and at
// least a few seconds, is healed, and the next waits until every broker
// serves and every partition of every topic has a leader and its full ISR,
// in every broker's metadata.
//
// The cut of a leader from its followers is made with iptables rules in
// the leader's network namespace, entered from the host with nsenter
// (cluster.Cut), rather than by giving each pair of brokers a network of
// its own. One network per pair would need a broker to advertise a
// different address to each peer (Kafka's listeners are per network, and
// a replica fetcher dials the address the controller gave it), so the
// cluster under test would no longer be the one `make cluster` starts; and
// three brokers already need three networks plus one for ZooKeeper and
// the clients, growing with the square of the brokers. A DROP rule for
// each follower's address, in and out, cuts exactly those links and
// leaves the leader's ZooKeeper session and its clients alone: the leader
// stays leader, shrinks the ISR to itself once replica.lag.time.max.ms
// has passed with records its followers could not fetch, and from then on
// refuses acks=all writes with NOT_ENOUGH_REPLICAS. That is the case the
// ISR and min.insync.replicas exist for: the writes stop, and none that
// was acknowledged depends on the cut-off leader alone.
//
// # The checks
//
// After the last fault the producers stop and wait for an answer to every
// record. Then:
//
//   - a fresh consumer reads every partition from its start to its high
//     watermark: every acknowledged record must be there (acked - read =
//     ∅), at the offset it was acknowledged at, once; and each
//     producer's records in a partition in the order of their sequence
//     numbers (a record read but never acknowledged is allowed: its
//     answer was lost, not the record);
//   - the consumer group must have delivered every acknowledged record
//     (deliveries beyond the first are counted, not failed: a group
//     delivers at least once across rebalances);
//   - the transactional topic must become stable (every partition's last
//     stable offset, ListOffsets read_committed, equal to its high
//     watermark: every transaction has its markers) within 90 s; then a
//     fresh read_committed consumer reads it to that offset, and
//     Jepsen's checks hold: no aborted read (no value of an aborted
//     transaction), no lost write (every value of a committed one), no
//     duplicate, and atomicity (each transaction read whole or not at
//     all, the unknown ones too);
//   - every partition's replicas must hold the same batches, byte for
//     byte, up to the high watermark: each broker's segment files are read
//     from its data volume (<cluster>-broker-<id>-data, log.dirs
//     /var/lib/kafka/data) with stage 01's batch reader (record.PeekSize,
//     record.Validate) and each batch's SHA-256 compared.
//
// # The report
//
// Report.WriteTo prints Markdown, ready for the chapter: one row per fault
// (kind, target, what the cluster was seen doing, when it was injected,
// healed and recovered, in seconds since the workload started), then the
// longest wait for an acknowledgement per kind, the records (sent,
// acknowledged, failed, read back, lost, moved, duplicated, out of order),
// the replicas' comparison, and the verdict with every failed check. The
// longest wait is the producers' view of unavailability: the longest time,
// from the fault to the recovery, that a partition went without an
// acknowledged write (the worst partition), and that the whole topic did.
// When records were written twice, the report shows the batches that hold
// a few of them (producer id, epoch, sequence) and how many times the
// producers reset their producer id: the one moment an idempotent
// producer may write a record twice.
//
// TestFaultsShort (in `make test`) injects eight faults in a fixed order
// (about two minutes on a 2-core machine, plus the cluster's start);
// TestFaultsRandom (`make faults SEED=42 DURATION=10m`) draws them at
// random from a printed seed and saves the report. A seed repeats the
// kinds of fault and the partitions and replicas they are aimed at; which
// broker that is depends on where the cluster put the leaders, and the
// timings are the machine's.
//
// A failed produce is counted and shown by its error. franz-go fails the
// records it has buffered when it cannot get a producer id, and the
// published port of a broker starting again accepts connections (Docker's
// proxy) before the broker listens, then closes them at once, which
// franz-go reads as a TLS mismatch and does not retry: a few failed
// records around a restart are that, not a lost acknowledgement.
package faults
