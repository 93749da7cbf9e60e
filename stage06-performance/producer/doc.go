// Package producer is a Kafka producer built the way Kafka's own Java
// producer is (seed §2.2.1 batching, §2.2.2 the memory pool), with Kafka's
// names for its parts and its configuration keys, so that a reader can
// hold it next to KafkaProducer's internals.
//
//	Produce(record, callback)
//	   │ partitioner: murmur2(key) % n, or the sticky partition (KIP-480)
//	   ▼
//	RecordAccumulator ─ one deque of batches per partition ──────────────┐
//	   t-0: [batch ▓▓▓▓ full][batch ▓▓░░ filling]                         │
//	   t-1: [batch ▓░░░ lingering]                        BufferPool      │
//	   t-2: [retry ▓▓▓▓][batch ▓▓▓▓ full][batch ▓░░░]     buffer.memory   │
//	   │   each batch encodes its records in place into a  free list of   │
//	   │   batch.size buffer from the BufferPool ◄──────── batch.size bufs │
//	   ▼ drain: per broker, the ready front batch of each partition it leads
//	sender(broker 1) ──► ProduceRequest ──► wire.Conn ──► broker 1
//	sender(broker 2) ──► ProduceRequest ──► wire.Conn ──► broker 2
//	                        ≤ max.in.flight.requests.per.connection unanswered
//	   ◄── response: callbacks with offsets, buffer back to the free list,
//	       or back into the deque for a retry (same bytes, same sequence)
//
// A batch is sendable ("ready") when it is full, when it has waited
// linger.ms, when its retry backoff is over, when Flush or Close asks, or
// when a Produce call waits for buffer memory (sending is how memory comes
// back). Each request takes at most one batch per partition and at most
// max.request.size bytes.
//
// # One goroutine per broker, not one Sender thread
//
// Kafka's Sender is one thread that drives every broker connection through
// a NetworkClient: it asks the accumulator which brokers have ready data,
// skips a broker whose connection already has
// max.in.flight.requests.per.connection requests out, drains and sends to
// the others, and polls the selector for answers. In Go the scheduler is
// the selector, and wire.Conn's Send blocks while the connection is full,
// so a single loop built on Send would stall every broker behind the
// busiest one. Here each broker has its own sender goroutine that drains
// only the partitions it leads and may block on its own connection;
// answers are handled on the connection's reader goroutine. The senders
// share the partitions' deques, each under its own mutex as Kafka's deques
// are under their own monitors, and the BufferPool; nothing else.
//
// Kafka's design is there too, as Options.SingleSender (sender_loop.go):
// one senderLoop that drains a broker's batches only when its connection
// has a free slot, sends with wire.Conn.TrySend (which never waits), dials
// on the side, and sleeps until a batch, an answer, a dial or a deadline
// wakes it. Both share nextRequest (drain and build) and the answer's
// handling. Measured on this 2-core box (three stage 04 brokers in the
// process, six partitions RF1, 100-byte records, acks=1; three runs of
// five rounds of 1,000,000 records, the modes alternating; medians of the
// 15, and of the 15 ratios of the rounds' two modes; CPU is the whole
// process's, brokers included):
//
//	records/s, CPU ns/record  per-broker   single loop  single/per-broker
//	direct                    2.17M, 855   2.07M, 923   1.07, 0.96
//	through proxies           1.76M, 1067  1.74M, 1040  1.03, 0.98
//	one broker 5 ms late      0.63M, 1193  0.64M, 1210  0.99, 1.01
//
//	go test -run '^$' -bench Senders -benchtime 1000000x ./producer
//
// The two are the same within this box's noise: the ratios of single
// rounds range over 0.86-1.47, and which mode is ahead changes from run to
// run. Both send about 290 records per request (two full 16 KiB batches),
// so draining only when a slot is free buys nothing here; and a goroutine
// blocked on a full connection costs nothing while it waits. With one slow
// broker both go at its pace: the sticky partitioner keeps giving its
// partitions a third of the records, their batches fill buffer.memory and
// Produce waits (Kafka's remedy is KIP-794's adaptive partitioner, not the
// Sender). The other brokers' records still flow in both modes while one
// broker's answers are held
// (TestABrokerWhoseAnswersAreHeldDoesNotStallTheOthers). What is left is
// the code: the single loop needs a send that cannot wait, dials on
// goroutines of their own, a request kept while its slot went to a
// metadata request, and a poll for slots such requests free without a
// word; and it still stops for InitProducerId. So per-broker senders stay
// the default.
//
// # Idempotence
//
// With enable.idempotence (the default with acks=all, as in Kafka 3.x) the
// producer asks a broker for a producer id (InitProducerId) and stamps
// each batch, when it is first sent, with the partition's next sequence
// number. A retry sends the same bytes; up to five batches of a partition
// are in flight, the five the broker remembers. When a batch comes back
// for a retry, nothing more is sent for its partition until the others in
// flight are back too, and then the deque (kept in the order the batches
// were made) goes out again in order; a partition's batches never go to a
// new leader while the old one still has some in flight. Answers:
// DUPLICATE_SEQUENCE_NUMBER is success; OUT_OF_ORDER_SEQUENCE_NUMBER is
// retried while an earlier batch of the partition is unresolved, and
// otherwise fails the batch; UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_EPOCH
// fail it. A batch that fails after it was sent with a sequence (those
// errors, retries or delivery.timeout.ms exhausted) leaves a gap, so the
// producer takes a new producer id and every partition's sequences start
// again at 0 (Kafka 2.5+ bumps the epoch instead, KIP-360); batches
// already stamped and not in flight are restamped (record.PutHeader
// rewrites the header and CRC, not the records).
//
// What is not handled: transactions; bumping the epoch with
// InitProducerId v3+ (a new id is taken instead); retrying
// UNKNOWN_PRODUCER_ID when the log start offset passed the producer's
// last acknowledged offset (Kafka 2.8 does, resetting the sequence); a
// batch still in flight under the old producer id when the id changes may
// land after newer batches of its partition; compression ratio
// estimation (a compressed batch holds batch.size bytes before
// compression, so it travels smaller than batch.size, where Kafka fills it
// to about batch.size after compression); KIP-794's adaptive partitioner.
package producer
