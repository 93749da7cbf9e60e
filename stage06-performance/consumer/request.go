package consumer

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

// capped lowers the highest version of a request that Conn negotiates:
// Fetch v13+ and OffsetCommit/OffsetFetch v9+ name topics by ID or by
// group batch, which this client does not speak; Kafka 3.x brokers in
// ZooKeeper mode (our target) and kfake serve the lower versions too.
type capped struct {
	kmsg.Request
	max int16
}

func (r capped) MaxVersion() int16 { return min(r.max, r.Request.MaxVersion()) }

// request sends req (capped at version max, 0 for no cap) to conn and
// waits for its response, of type R.
func request[R kmsg.Response](ctx context.Context, conn *wire.Conn, req kmsg.Request, max int16) (R, error) {
	var zero R
	if max > 0 {
		req = capped{req, max}
	}
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return zero, err
	}
	r, ok := resp.(R)
	if !ok {
		return zero, fmt.Errorf("consumer: %s answered with %T", conn.Addr(), resp)
	}
	return r, nil
}
