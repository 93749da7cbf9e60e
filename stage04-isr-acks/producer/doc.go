// Package producer keeps what a partition knows of its idempotent
// producers (Kafka's ProducerStateManager): for each producer id, its
// epoch and the sequence ranges and offsets of its last five batches, so
// that a retried batch is answered with the offsets it already has instead
// of being appended twice, a gap in the sequence is refused, and a fenced
// epoch is refused.
//
// Stage 04, part 2 (issue 10). This file set holds the rules; the append
// path, InitProducerId and snapshots build on them.
package producer
