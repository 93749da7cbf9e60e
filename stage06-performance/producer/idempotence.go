package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// producerID returns the idempotent producer's id and epoch, asking a
// broker for them (InitProducerId) when it has none. One request at a
// time: the other senders wait for its answer. The lock is not held
// across the request, because resetProducerID runs on a connection's
// reader goroutine, which must not wait for an answer it has to read.
func (p *Producer) producerID(ctx context.Context) (producerID, error) {
	for {
		p.idMu.Lock()
		if p.id.id >= 0 {
			id := p.id
			p.idMu.Unlock()
			return id, nil
		}
		if wait := p.idInit; wait != nil { // another sender is asking
			p.idMu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return noProducerID, ctx.Err()
			}
		}
		done := make(chan struct{})
		p.idInit = done
		p.idMu.Unlock()

		id, err := p.initProducerID(ctx)
		p.idMu.Lock()
		if err == nil {
			p.id = id
		}
		p.idInit = nil
		close(done)
		p.idMu.Unlock()
		return id, err
	}
}

// initProducerID asks the brokers of the last metadata, one after the
// other, for a producer id (any broker hands them out).
func (p *Producer) initProducerID(ctx context.Context) (producerID, error) {
	if p.cfg.TransactionalID != "" {
		return p.initTxnProducerID(ctx) // from the id's coordinator (txn.go)
	}
	m := p.pool.Metadata()
	if m == nil || len(m.Brokers) == 0 {
		return noProducerID, errors.New("no broker known yet")
	}
	var errs []error
	for _, addr := range m.Brokers {
		rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
		conn, err := p.pool.Conn(rctx, addr)
		if err == nil {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionTimeoutMillis = 60_000 // Kafka's transaction.timeout.ms default; unused without a transactional id
			var resp kmsg.Response
			if resp, err = conn.Request(rctx, req); err == nil {
				r := resp.(*kmsg.InitProducerIDResponse)
				if err = kerr.ErrorForCode(r.ErrorCode); err == nil {
					cancel()
					p.logger.Debug("producer id", "id", r.ProducerID, "epoch", r.ProducerEpoch)
					return producerID{r.ProducerID, r.ProducerEpoch}, nil
				}
			}
		}
		cancel()
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return noProducerID, errors.Join(errs...)
}

// resetProducerID forgets old, if it is still the producer's id, so that
// the next batch sent asks for a new one (see fail).
func (p *Producer) resetProducerID(old producerID) {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	if p.id == old {
		p.logger.Warn("producer: a sequence was lost; taking a new producer id", "id", old.id, "epoch", old.epoch)
		p.id, p.prevID = noProducerID, old
	}
}
