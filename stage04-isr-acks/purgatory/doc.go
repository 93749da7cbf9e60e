// Package purgatory holds requests that cannot be answered yet (Kafka's
// DelayedOperationPurgatory): a produce with acks=all waiting for the high
// watermark to pass its batch, a fetch waiting for fetch.min.bytes. Each
// waiting request is an Operation, watched under keys (the partitions it
// waits on) and given a deadline:
//
//	TryCompleteElseWatch(op, timeout, keys)  try now; else watch the keys
//	CheckAndComplete(key)                    something changed on key: try
//	                                         every operation watching it
//	(deadline passes)                        the operation expires
//
// Whichever comes first completes the operation, exactly once: OnComplete
// runs once, followed by OnExpiration if the deadline won. No goroutine
// waits for an operation; a parked request costs a few small structs.
//
// Deadlines live on a hierarchical timing wheel (Kafka's TimingWheel, after
// Varghese and Lauck's "Hashed and Hierarchical Timing Wheels"). The lowest
// wheel has 20 buckets of 1 ms; each wheel's whole span is one bucket of the
// next, created when first needed:
//
//	wheel 0: tick 1 ms,   20 buckets, spans 20 ms   [0][1][2] ... [19]
//	wheel 1: tick 20 ms,  20 buckets, spans 400 ms  [0][1][2] ... [19]
//	wheel 2: tick 400 ms, 20 buckets, spans 8 s     [0][1][2] ... [19]
//	wheel 3: tick 8 s,    20 buckets, spans 160 s   ...
//
// Adding a deadline is O(1): it goes in the bucket of the lowest wheel whose
// span reaches it. Only buckets that hold something are queued, by
// expiration, in a delay queue (a heap); a reaper goroutine sleeps until the
// first one is due. A due bucket of a higher wheel is emptied into the
// wheels below (its deadlines are now near), so each deadline moves down at
// most once per wheel and fires within one 1 ms tick of its time. Thirty
// seconds of pending timeouts cost four wheels and one heap entry per
// non-empty bucket, whatever the number of operations.
//
// Files, in reading order: operation.go (what an operation is), purgatory.go
// (watching and completing), timer_list.go (a bucket: a linked list of
// deadlines), timing_wheel.go, delay_queue.go and timer.go (the wheels, the
// queue of due buckets, and the timer that drives them).
package purgatory
