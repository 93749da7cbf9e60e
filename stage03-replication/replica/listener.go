package replica

// Listener learns of the changes to a partition that may let a waiting
// request complete or the ISR change: stage 04 checks its purgatories
// (Kafka's tryCompleteDelayedRequests) and its ISR rules there. Each method
// runs after the change, on the goroutine that made it (a request handler,
// a fetcher, the Manager's LeaderAndIsr), with no lock of this package
// held: not the partition's, not the Manager's, not a fetcher's. So a
// listener may look partitions up (Manager.Partition, Partitions) and read
// them. It must be quick and must not block, and it must not call
// LeaderAndIsr, StopReplica, PauseFetching or Close: those wait for the
// fetchers to finish telling (chapter 3, "Locks").
//
// A follower's changes come from its fetcher, which applies a leader's
// answer and then tells what it did, in log order (one fetcher per
// partition). LeaderAndIsr and StopReplica stop a partition's fetch before
// they change its role, and wait until everything its fetcher applied has
// been told: a listener never hears of a follower's append after it has
// heard that the partition became leader.
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
	// too. For LeaderAndIsr and StopReplica the Manager calls it once the
	// whole request is done and it holds no lock.
	StateChanged(p *Partition)
}

// news is what a change has to tell the Listener, gathered while the
// change is made and told (tell) once the goroutine that made it holds no
// lock: a fetcher gathers a whole partition's answer (records, high
// watermark, log start) and tells it after the apply.
type news []func()

func (n *news) add(call func()) { *n = append(*n, call) }

// tell makes the calls, in the order they were gathered.
func (n news) tell() {
	for _, call := range n {
		call()
	}
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
