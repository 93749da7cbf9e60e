package replica

// Listener learns of the changes to a partition that may let a waiting
// request complete or the ISR change: stage 04 checks its purgatories
// (Kafka's tryCompleteDelayedRequests) and its ISR rules there. Each method
// runs after the change, with no lock held, on the goroutine that made it
// (a request handler, a fetcher); it must be quick and must not block.
type Listener interface {
	// Appended: records were appended, as leader or as follower.
	Appended(p *Partition)
	// HighWatermarkAdvanced: the high watermark moved forward.
	HighWatermarkAdvanced(p *Partition)
	// FollowerFetched: the leader recorded a follower's fetch position
	// (once per fetch request, when it is read).
	FollowerFetched(p *Partition, follower int32)
	// Replicated: a follower appended these whole batches, copied from
	// its leader; calls come in log order (one fetcher per partition).
	// Stage 04 builds the producer state from them, as a leader does from
	// its own appends, so that a follower that becomes leader knows its
	// producers.
	Replicated(p *Partition, batches []byte)
	// Truncated: the log was cut back to end (a follower diverging from
	// its leader), or emptied and restarted at end (a follower starting
	// over at its leader's log start).
	Truncated(p *Partition, end int64)
	// LogStartAdvanced: retention deleted the log's head up to start
	// (stage 04 forgets the producers whose batches all went).
	LogStartAdvanced(p *Partition, start int64)
	// StateChanged: the partition became leader or follower, changed
	// leader epoch or ISR, or stopped; its high watermark may have moved
	// too. For LeaderAndIsr and StopReplica the Manager calls it once it
	// has released its own lock, since a listener may look partitions up.
	StateChanged(p *Partition)
}

// NopListener ignores everything: this stage's requests wait on the
// partition's Signals instead.
type NopListener struct{}

func (NopListener) Appended(*Partition)                {}
func (NopListener) HighWatermarkAdvanced(*Partition)   {}
func (NopListener) FollowerFetched(*Partition, int32)  {}
func (NopListener) Replicated(*Partition, []byte)      {}
func (NopListener) Truncated(*Partition, int64)        {}
func (NopListener) LogStartAdvanced(*Partition, int64) {}
func (NopListener) StateChanged(*Partition)            {}
