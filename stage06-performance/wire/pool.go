package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata is what a Metadata response says about the cluster.
type Metadata struct {
	Brokers    map[int32]string // broker id → host:port
	Controller int32
	Topics     map[string]*Topic
}

// Topic is one topic of a Metadata response.
type Topic struct {
	Name       string
	Err        error       // a kerr error, nil when the topic is known
	Partitions []Partition // indexed by partition number
}

// Partition is one partition of a Metadata response.
type Partition struct {
	Partition   int32
	Leader      int32 // -1 while there is none
	LeaderEpoch int32
	Err         error // e.g. kerr.LeaderNotAvailable
}

// Pool keeps one connection per broker, dialled when first needed and
// again after it died, and the last metadata it fetched. Safe for
// concurrent use.
type Pool struct {
	seeds []string
	opts  Options

	mu     sync.Mutex
	conns  map[string]*dial // by address
	meta   *Metadata
	closed bool
}

// A dial is a connection being made or made; ready is closed when c or
// err is set.
type dial struct {
	ready chan struct{}
	c     *Conn
	err   error
}

// NewPool returns a pool that bootstraps from seeds (host:port each).
func NewPool(seeds []string, opts Options) *Pool {
	return &Pool{seeds: seeds, opts: opts.withDefaults(), conns: map[string]*dial{}}
}

// Conn returns the live connection to addr, dialling it if there is none.
// Concurrent callers share one dial.
func (p *Pool) Conn(ctx context.Context, addr string) (*Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, net.ErrClosed
	}
	d := p.conns[addr]
	if d != nil {
		select {
		case <-d.ready:
			if d.err != nil || d.c.Err() != nil {
				d = nil // dial again
			}
		default:
		}
	}
	if d == nil {
		d = &dial{ready: make(chan struct{})}
		p.conns[addr] = d
		go func() {
			d.c, d.err = Dial(context.WithoutCancel(ctx), addr, p.opts)
			close(d.ready)
			p.mu.Lock()
			if p.closed && d.c != nil {
				d.c.Close()
			}
			p.mu.Unlock()
		}()
	}
	p.mu.Unlock()
	select {
	case <-d.ready:
		return d.c, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Broker returns the connection to broker id, as the last metadata names
// it.
func (p *Pool) Broker(ctx context.Context, id int32) (*Conn, error) {
	p.mu.Lock()
	var addr string
	if p.meta != nil {
		addr = p.meta.Brokers[id]
	}
	p.mu.Unlock()
	if addr == "" {
		return nil, fmt.Errorf("wire: broker %d is not in the metadata", id)
	}
	return p.Conn(ctx, addr)
}

// Metadata is the last metadata fetched, or nil before the first Refresh.
// It is never modified: Refresh replaces it.
func (p *Pool) Metadata() *Metadata {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.meta
}

// Refresh asks for the metadata of topics (all topics when nil), from the
// brokers it knows and then the seeds, the first that answers.
func (p *Pool) Refresh(ctx context.Context, topics []string) (*Metadata, error) {
	var addrs []string
	if m := p.Metadata(); m != nil {
		for _, a := range m.Brokers {
			addrs = append(addrs, a)
		}
	}
	addrs = append(addrs, p.seeds...)
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = make([]kmsg.MetadataRequestTopic, len(topics))
		for i, t := range topics {
			req.Topics[i].Topic = kmsg.StringPtr(t)
		}
	}
	var errs []error
	for _, addr := range addrs {
		c, err := p.Conn(ctx, addr)
		if err == nil {
			var resp kmsg.Response
			if resp, err = c.Request(ctx, req); err == nil {
				m := parseMetadata(resp.(*kmsg.MetadataResponse))
				p.mu.Lock()
				p.meta = m
				p.mu.Unlock()
				return m, nil
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("wire: no broker answered Metadata: %w", errors.Join(errs...))
}

func parseMetadata(r *kmsg.MetadataResponse) *Metadata {
	m := &Metadata{Brokers: map[int32]string{}, Controller: r.ControllerID, Topics: map[string]*Topic{}}
	for _, b := range r.Brokers {
		m.Brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, t := range r.Topics {
		if t.Topic == nil {
			continue
		}
		topic := &Topic{Name: *t.Topic, Err: kerr.ErrorForCode(t.ErrorCode)}
		n := 0
		for _, pt := range t.Partitions {
			n = max(n, int(pt.Partition)+1)
		}
		topic.Partitions = make([]Partition, n)
		for i := range topic.Partitions {
			topic.Partitions[i] = Partition{Partition: int32(i), Leader: -1, Err: kerr.LeaderNotAvailable}
		}
		for _, pt := range t.Partitions {
			if pt.Partition < 0 {
				continue
			}
			topic.Partitions[pt.Partition] = Partition{Partition: pt.Partition, Leader: pt.Leader,
				LeaderEpoch: pt.LeaderEpoch, Err: kerr.ErrorForCode(pt.ErrorCode)}
		}
		m.Topics[topic.Name] = topic
	}
	return m
}

// Close closes every connection; the pool is not used again.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[string]*dial{}
	p.mu.Unlock()
	for _, d := range conns {
		select {
		case <-d.ready:
			if d.c != nil {
				d.c.Close()
			}
		default: // the dialling goroutine closes it
		}
	}
}
