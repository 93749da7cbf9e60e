package kafkazk

import (
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// GenerateBrokerSequenceID returns a number no other call in the cluster
// got, for a broker started without broker.id (Kafka's
// KafkaZkClient.generateBrokerSequenceId): it writes /brokers/seqid
// unconditionally and returns the znode's new data version, which
// ZooKeeper increments atomically. The final module adds
// reserved.broker.max.id to it, so that generated ids never collide with
// configured ones.
func (c *Client) GenerateBrokerSequenceID() (int32, error) {
	stat, err := c.conn.Set(SeqIDPath, nil, -1)
	if errors.Is(err, zk.ErrNoNode) {
		if err := c.createPersistent(SeqIDPath, nil); err != nil {
			return 0, err
		}
		stat, err = c.conn.Set(SeqIDPath, nil, -1)
	}
	if err != nil {
		return 0, fmt.Errorf("kafkazk: set %s: %w", SeqIDPath, err)
	}
	return stat.Version, nil
}
