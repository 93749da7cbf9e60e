package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkaworkbook/workbook/stage06-performance/perf"
)

// A window is the part of a run that is measured: the warm-up before it
// (connections, metadata, the producer id, batches and heaps growing to
// their working size) is not.
type window struct {
	warmup, length time.Duration
	// minSleep is the latency runs' pacing: the producing loop sleeps
	// only once it is that far ahead of its schedule, and otherwise sends
	// at once. Kafka's ThroughputThrottler (kafka-producer-perf-test
	// --throughput) sleeps at least 2 ms (MIN_SLEEP_NS), so at 10,000
	// records/s it sends bursts of about 20 records every 2 ms; 0 sleeps
	// before every record, a record every 100 µs.
	minSleep time.Duration
}

// throughput is one producer's run as fast as it takes records.
type throughput struct {
	records int64         // acknowledged inside the window
	elapsed time.Duration // the window, as measured
	failed  int64         // records that failed, warm-up and drain included
	cpu     cpuUse        // during the window
}

func (t throughput) perSec() float64 { return float64(t.records) / t.elapsed.Seconds() }

// measureThroughput produces size-byte records with the producer newP
// makes, as fast as it takes them, for w's warm-up and then its length,
// and counts
// the records acknowledged inside the window. One goroutine calls
// produce in a loop, as kafka-producer-perf-test's does with
// --throughput -1: the producer's buffer (buffer.memory, or kgo's
// buffered records) is what holds it back, so the rate is the
// acknowledgements' rate.
func measureThroughput(ctx context.Context, newP func(ackFunc) (producerClient, error), size int, w window, meter *cpuMeter) (throughput, error) {
	var acked, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	p, err := newP(func(_ []byte, err error) {
		if err != nil {
			if failed.Add(1) == 1 {
				firstErr.Store(&err)
			}
			return
		}
		acked.Add(1)
	})
	if err != nil {
		return throughput{}, err
	}
	defer p.close()
	value := payload(size) // every record the same bytes, as Kafka's tool sends them

	// The loop stops at a flag, not by cancelling the context it
	// produces with: kgo fails a buffered record whose context ends.
	var stop atomic.Bool
	defer stop.Store(true)
	produced := make(chan error, 1)
	go func() {
		for !stop.Load() {
			if err := p.produce(ctx, value); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()

	var res throughput
	select { // the warm-up
	case <-time.After(w.warmup):
	case err := <-produced:
		return res, fmt.Errorf("produce: %w", err)
	case <-ctx.Done():
		return res, ctx.Err()
	}
	n0, from := acked.Load(), mustSample(meter)
	select { // the window
	case <-time.After(w.length):
	case err := <-produced:
		return res, fmt.Errorf("produce: %w", err)
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.records = acked.Load() - n0
	to := mustSample(meter)
	res.elapsed = to.at.Sub(from.at)
	res.cpu = usage(from, to)
	stop.Store(true)
	if err := <-produced; err != nil {
		return res, fmt.Errorf("produce: %w", err)
	}

	// Drain what is buffered, so that the next run starts on a quiet
	// cluster.
	flushCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := p.flush(flushCtx); err != nil {
		return res, fmt.Errorf("flush: %w", err)
	}
	res.failed = failed.Load()
	if res.failed > 0 {
		return res, fmt.Errorf("%d records failed, the first with: %w", res.failed, *firstErr.Load())
	}
	return res, nil
}

// latency is one producer-consumer pair's run at a fixed rate.
type latency struct {
	rate       float64        // records sent per second inside the window
	e2e        perf.Histogram // Produce call to the consumer's poll returning it, per record sent in the window
	ack        perf.Histogram // Produce call to its acknowledgement, the same records
	acked      int64          // records sent in the window and acknowledged
	consumed   int64          // of those, read back by the consumer
	duplicates int64          // of those, read back more than once
	cpu        cpuUse
}

// measureLatency sends size-byte records with the producer newP makes,
// at rate records per second for w's warm-up and length, while the
// consumer newC makes reads every partition, and measures each record sent inside the window
// from the moment it was handed to the producer: to its
// acknowledgement, and to the consumer's poll returning it. Both ends
// read the same clock, so the record carries its send time in its first
// eight bytes (the record's own timestamp has only milliseconds), and
// its sequence number in the next eight, to count duplicates.
//
// Records are paced as Kafka's ThroughputThrottler paces them, by the
// schedule, not by the gap since the last one: a record late by a
// timer's overshoot is followed at once by the next, and the rate holds;
// the loop sleeps only once it is w.minSleep ahead (see window). Each
// record's latency counts from its own send, whenever in a burst it
// went.
func measureLatency(ctx context.Context, newP func(ackFunc) (producerClient, error), newC func() (consumerClient, error),
	size int, rate float64, w window, meter *cpuMeter) (latency, error) {
	var res latency
	var mu sync.Mutex // guards res.ack, res.acked: acknowledgements come on the producer's goroutines
	var failed atomic.Int64
	var from, to atomic.Int64 // the window, in Unix nanoseconds; zero until known
	inWindow := func(v []byte) (int64, bool) {
		sent := int64(binary.LittleEndian.Uint64(v))
		f, t := from.Load(), to.Load()
		return sent, f != 0 && sent >= f && (t == 0 || sent < t)
	}

	c, err := newC()
	if err != nil {
		return res, err
	}
	defer c.close()
	var seen sync.Map // sequence number → struct{}: to count duplicates
	var consumed, duplicates atomic.Int64
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	consumerDone := make(chan error, 1)
	go func() {
		for {
			err := c.poll(consumeCtx, func(v []byte) {
				now := time.Now().UnixNano()
				sent, ok := inWindow(v)
				if !ok {
					return
				}
				if _, dup := seen.LoadOrStore(binary.LittleEndian.Uint64(v[8:]), struct{}{}); dup {
					duplicates.Add(1)
					return
				}
				res.e2e.Record(time.Duration(now - sent)) // only this goroutine records e2e
				consumed.Add(1)
			})
			if consumeCtx.Err() != nil {
				consumerDone <- nil
				return
			}
			if err != nil {
				consumerDone <- err
				return
			}
		}
	}()

	p, err := newP(func(v []byte, err error) {
		now := time.Now().UnixNano()
		if err != nil {
			failed.Add(1)
			return
		}
		if sent, ok := inWindow(v); ok {
			mu.Lock()
			res.ack.Record(time.Duration(now - sent))
			res.acked++
			mu.Unlock()
		}
	})
	if err != nil {
		return res, err
	}
	defer p.close()

	filler := payload(size)
	start := time.Now()
	measureFrom, end := start.Add(w.warmup), start.Add(w.warmup+w.length)
	var cpuFrom cpuSample
	var sentInWindow int64
	for i := int64(0); ; i++ {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if wait := time.Until(due); wait > 0 && wait >= w.minSleep {
			time.Sleep(wait)
		}
		now := time.Now()
		if now.After(end) {
			to.Store(end.UnixNano())
			break
		}
		if from.Load() == 0 && !now.Before(measureFrom) {
			cpuFrom = mustSample(meter)
			from.Store(now.UnixNano())
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		v := make([]byte, size) // kgo keeps the value until it is sent: one per record
		copy(v, filler)
		binary.LittleEndian.PutUint64(v[8:], uint64(i))
		binary.LittleEndian.PutUint64(v, uint64(time.Now().UnixNano()))
		if err := p.produce(ctx, v); err != nil {
			return res, fmt.Errorf("produce: %w", err)
		}
		if from.Load() != 0 {
			sentInWindow++
		}
	}
	cpuTo := mustSample(meter)
	res.cpu = usage(cpuFrom, cpuTo)
	res.rate = float64(sentInWindow) / time.Duration(to.Load()-from.Load()).Seconds()

	flushCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.flush(flushCtx); err != nil {
		return res, fmt.Errorf("flush: %w", err)
	}
	if n := failed.Load(); n > 0 {
		return res, fmt.Errorf("%d records failed", n)
	}
	mu.Lock()
	acked := res.acked
	mu.Unlock()
	// Wait until the consumer has read every acknowledged record of the
	// window, or give up after 30 s and say how many it missed.
	deadline := time.Now().Add(30 * time.Second)
	for consumed.Load() < acked && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stopConsumer()
	if err := <-consumerDone; err != nil && !errors.Is(err, context.Canceled) {
		return res, fmt.Errorf("consume: %w", err)
	}
	res.consumed, res.duplicates = consumed.Load(), duplicates.Load()
	if res.consumed < acked {
		return res, fmt.Errorf("the consumer read %d of the %d records acknowledged", res.consumed, acked)
	}
	return res, nil
}

// payload is size random uppercase letters, kafka-producer-perf-test's
// payload: bytes that compress as little as text does.
func payload(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte('A' + rand.IntN(26))
	}
	return b
}

// mustSample samples meter; a meter that cannot read /proc any more (a
// container stopped meanwhile) gives an empty sample, which usage turns
// into an empty row of the CPU table rather than no table.
func mustSample(meter *cpuMeter) cpuSample {
	s, err := meter.sample()
	if err != nil {
		s = cpuSample{at: time.Now()}
	}
	return s
}
