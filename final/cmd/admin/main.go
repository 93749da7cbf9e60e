// Command admin manages a Kafka cluster: topics, consumer groups, configs
// and SCRAM users, in the manner of Kafka's kafka-topics.sh,
// kafka-consumer-groups.sh and kafka-configs.sh. Run `admin help`.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/kafkaworkbook/workbook/final/admin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := admin.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
