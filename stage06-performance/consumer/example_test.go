package consumer_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
)

// A group member reads, processes and polls again; the background
// committer commits what the previous Poll returned, and Close commits
// the rest and leaves the group.
func Example() {
	cfg, err := consumer.ParseConfig(map[string]string{
		"bootstrap.servers": "127.0.0.1:9092",
		"group.id":          "page-views",
		"auto.offset.reset": "earliest",
	})
	if err != nil {
		panic(err)
	}
	c, err := consumer.New(cfg, slog.Default())
	if err != nil {
		panic(err)
	}
	defer c.Close(context.Background())
	if err := c.Subscribe("page-views"); err != nil {
		panic(err)
	}
	ctx := context.Background()
	for {
		recs, err := c.Poll(ctx)
		if err != nil {
			panic(err)
		}
		for i := range recs {
			r := &recs[i]
			// r.Value aliases the fetched bytes: copy it to keep it
			// beyond the next Poll.
			fmt.Printf("%s[%d]@%d %s\n", r.Topic, r.Partition, r.Offset, r.Value)
		}
	}
}
