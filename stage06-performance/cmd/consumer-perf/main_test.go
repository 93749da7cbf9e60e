package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/perf"
)

// TestConsumerPerfPrintsKafkasSummary: with either client, the tool reads
// the records a group has not read yet and ends with
// kafka-consumer-perf-test's header and line, counting every record.
func TestConsumerPerfPrintsKafkasSummary(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.SeedTopics(3, "perf"))
	require.NoError(t, err)
	defer fake.Close()
	addr := fake.ListenAddrs()[0]
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("perf"))
	require.NoError(t, err)
	var recs []*kgo.Record
	for range 3000 {
		recs = append(recs, &kgo.Record{Value: bytes.Repeat([]byte{'v'}, 100)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.ProduceSync(ctx, recs...).FirstErr())
	p.Close()

	for _, client := range []string{"ours", "franz-go"} {
		t.Run(client, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, run(options{bootstrap: addr, topic: "perf", messages: 3000, group: "perf-" + client,
				timeout: 20 * time.Second, interval: time.Hour, fetchSize: 1 << 20, client: client}, &out))
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, 2, out.String())
			require.Equal(t, perf.ConsumerHeader, lines[0])
			fields := strings.Split(lines[1], ", ")
			require.Len(t, fields, 10)
			require.Equal(t, "3000", fields[4], "data.consumed.in.nMsg")
			require.Equal(t, "0.2861", fields[2], "data.consumed.in.MB: 3000 × 100 B")
		})
	}
}
