package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition is one partition's state in one broker's metadata.
type Partition struct {
	Leader, LeaderEpoch int32
	Replicas, ISR       []int32 // ISR sorted
}

// View is one broker's metadata for a topic, by partition.
type View map[int32]Partition

// Views asks each broker that answers, alone, for topic's partitions:
// its metadata cache, which the controller keeps with UpdateMetadata. A
// broker the controller cannot reach keeps an old view (a leader cut from
// its followers shrinks the ISR in ZooKeeper, and the followers never
// hear of it), so what must hold cluster-wide must hold in every view:
// see Settled.
func (c *Cluster) Views(ctx context.Context, topic string) map[int]View {
	out := map[int]View{}
	for _, b := range c.brokers {
		if v, err := brokerView(ctx, b.Addr, topic); err == nil {
			out[b.ID] = v
		}
	}
	return out
}

// brokerView asks the broker at addr, and no other, for topic's
// partitions.
func brokerView(ctx context.Context, addr, topic string) (View, error) {
	cl, err := SoloClient(addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("%s: no topic %s in its metadata", addr, topic)
	}
	v := View{}
	for _, p := range resp.Topics[0].Partitions {
		isr := slices.Clone(p.ISR)
		slices.Sort(isr)
		v[p.Partition] = Partition{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: isr}
	}
	return v, nil
}

// Settled reports whether every broker answers and, in every one's view,
// each of topic's partitions has a leader and an ISR of all its replicas:
// the cluster has healed. When not, it says what is missing.
func (c *Cluster) Settled(ctx context.Context, topic string) (bool, string) {
	views := c.Views(ctx, topic)
	if len(views) < len(c.brokers) {
		return false, fmt.Sprintf("%d of %d brokers answer", len(views), len(c.brokers))
	}
	for id, v := range views {
		if len(v) == 0 {
			return false, fmt.Sprintf("broker %d knows no partition of %s", id, topic)
		}
		for p, s := range v {
			if s.Leader < 0 {
				return false, fmt.Sprintf("broker %d: %s-%d has no leader", id, topic, p)
			}
			if len(s.ISR) != len(s.Replicas) {
				return false, fmt.Sprintf("broker %d: %s-%d has ISR %v of replicas %v", id, topic, p, s.ISR, s.Replicas)
			}
		}
	}
	return true, ""
}
