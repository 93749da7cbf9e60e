package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// produceTimeout is the timeout every Produce request carries: the Java
// producer's request.timeout.ms default. It is longer than a follower takes
// to leave the ISR (at most 1.5 × replica.lag.time.max.ms after it last
// caught up) at the demo's default -lag, so an acks=all record appended
// while a paused follower is still in the ISR waits for the shrink and is
// acknowledged, rather than timing out.
const produceTimeout = 30 * time.Second

// produce sends n records, each in a Produce request of its own, and
// prints how many the broker acknowledged, its first error and the time.
func (d *demo) produce(n int, acksName string) error {
	acks, clientAcks, err := parseAcks(acksName)
	if err != nil {
		return err
	}
	// franz-go demands that idempotence be off for acks other than all;
	// it is off for all too, since these brokers have no InitProducerId
	// (the idempotent producer is part 2 of this stage). The client
	// rewrites a raw Produce's acks to its own setting, hence one client
	// per acks.
	seeds := d.c.Addrs()
	if len(seeds) == 0 {
		return fmt.Errorf("no broker is running")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(clientAcks),
		kgo.DisableIdempotentWrite(), kgo.ProduceRequestTimeout(produceTimeout))
	if err != nil {
		return err
	}
	defer cl.Close()

	var acked int
	var firstErr error
	var slowest time.Duration
	start := time.Now()
	for range n {
		d.sent++
		began := time.Now()
		err := d.produceOne(cl, acks, fmt.Sprintf("record-%d", d.sent))
		slowest = max(slowest, time.Since(began))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		acked++
	}
	took := time.Since(start).Round(time.Millisecond)
	if acks == 0 {
		fmt.Fprintf(d.out, "acks=0: %d of %d sent in %v; the broker answers nothing, so nothing is acknowledged", acked, n, took)
	} else {
		fmt.Fprintf(d.out, "acks=%s: %d of %d acknowledged in %v (slowest %v)", acksName, acked, n, took, slowest.Round(time.Millisecond))
	}
	if firstErr != nil {
		fmt.Fprintf(d.out, "; first error: %v", firstErr)
	}
	fmt.Fprintln(d.out)
	return nil
}

// parseAcks reads all, -1, 1 or 0 as the wire's acks and franz-go's.
func parseAcks(name string) (int16, kgo.Acks, error) {
	switch name {
	case "all", "-1":
		return -1, kgo.AllISRAcks(), nil
	case "1":
		return 1, kgo.LeaderAck(), nil
	case "0":
		return 0, kgo.NoAck(), nil
	}
	return 0, kgo.Acks{}, fmt.Errorf("acks %q: all, 1 or 0", name)
}

// produceOne sends one record to the leader the stored state names and
// returns the broker's error for it, as a Kafka error code (kerr). Nothing
// is retried: the answer shows as the broker gave it.
func (d *demo) produceOne(cl *kgo.Client, acks int16, value string) error {
	s, _, err := d.c.States.PartitionState(d.tp)
	if err != nil {
		return err
	}
	if s.Leader < 0 {
		return kerr.LeaderNotAvailable
	}
	batch, err := record.AppendBatch(nil, record.NewBatch(time.Now().UnixMilli(), record.Record{Value: []byte(value)}))
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, int32(produceTimeout.Milliseconds())
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: d.tp.Topic,
		Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: d.tp.Partition, Records: batch}}}}
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout+10*time.Second)
	defer cancel()
	resp, err := cl.Broker(int(s.Leader)).Request(ctx, req)
	if err != nil {
		return fmt.Errorf("broker %d: %w", s.Leader, err)
	}
	if acks == 0 {
		return nil // franz-go hands back an empty response: none comes
	}
	topics := resp.(*kmsg.ProduceResponse).Topics
	if len(topics) != 1 || len(topics[0].Partitions) != 1 {
		return fmt.Errorf("broker %d answered for %d topics, not 1", s.Leader, len(topics))
	}
	return kerr.ErrorForCode(topics[0].Partitions[0].ErrorCode)
}
