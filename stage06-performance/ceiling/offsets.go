package ceiling

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// EndOffsets is the log end offset of each of topic's partitions
// 0..partitions-1, asked of the broker c is connected to (ListOffsets,
// latest). The load generator reads only its responses' correlation ids,
// not their error codes, so a load checks what it did by the end offsets
// it moved: requests × records, or the broker refused some.
func EndOffsets(ctx context.Context, c *protocol.Client, topic string, partitions int32) ([]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // latest: the log end offset
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	resp, err := c.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("ceiling: ListOffsets %s: %w", topic, err)
	}
	out := make([]int64, partitions)
	seen := 0
	for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("ceiling: ListOffsets %s-%d: %w", topic, rp.Partition, err)
			}
			if rt.Topic == topic && rp.Partition >= 0 && rp.Partition < partitions {
				out[rp.Partition] = rp.Offset
				seen++
			}
		}
	}
	if seen != int(partitions) {
		return nil, fmt.Errorf("ceiling: ListOffsets %s: %d of %d partitions answered", topic, seen, partitions)
	}
	return out, nil
}

// Appended is the number of records appended between two EndOffsets.
func Appended(before, after []int64) int64 {
	var n int64
	for i := range after {
		n += after[i] - before[i]
	}
	return n
}
