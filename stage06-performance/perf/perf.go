// Package perf is what the stage's perf tools (cmd/producer-perf,
// cmd/consumer-perf) share: a latency histogram cheap enough to record
// every record's latency, and the lines Kafka's kafka-producer-perf-test
// and kafka-consumer-perf-test print, so that a reader who knows those
// tools reads ours without a legend.
package perf

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"sync"
	"time"
)

// Histogram counts latencies in buckets about 6% wide (16 per power of
// two, from 1 µs to about 70 minutes): recording is a few instructions and
// no allocation, and a percentile is off by at most a bucket's width.
// The zero value is ready; it is not safe for concurrent use (see Window).
type Histogram struct {
	counts [buckets]int64
	n      int64
	sum    time.Duration
	max    time.Duration
}

const (
	sub     = 16 // buckets per power of two
	buckets = 32 * sub
)

func bucket(d time.Duration) int {
	us := uint64(max(d/time.Microsecond, 1))
	exp := bits.Len64(us) - 1 // us is in [2^exp, 2^(exp+1))
	var frac uint64
	if exp >= 4 {
		frac = (us >> (exp - 4)) & (sub - 1)
	} else {
		frac = (us << (4 - exp)) & (sub - 1)
	}
	return min(exp*sub+int(frac), buckets-1)
}

// bucketTop is the largest latency bucket i holds.
func bucketTop(i int) time.Duration {
	exp, frac := i/sub, i%sub
	us := math.Ldexp(1+float64(frac+1)/sub, exp)
	return time.Duration(us * float64(time.Microsecond))
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	h.counts[bucket(d)]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

// Merge adds o's latencies to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count is the number of latencies recorded.
func (h *Histogram) Count() int64 { return h.n }

// Mean is the mean latency, 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Max is the largest latency.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile is the latency below which a fraction q of them lie.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= want {
			if i == buckets-1 { // the overflow bucket has no top
				return h.max
			}
			return min(bucketTop(i), h.max)
		}
	}
	return h.max
}

// Window is a Histogram shared by the goroutines that record and a
// reporter that prints a line every few seconds, as the Kafka tools do:
// Snapshot returns the latencies since the last snapshot.
type Window struct {
	mu     sync.Mutex
	start  time.Time
	now    Histogram
	bytes  int64
	total  Histogram
	tbytes int64
	began  time.Time
}

// NewWindow starts counting now.
func NewWindow() *Window {
	t := time.Now()
	return &Window{start: t, began: t}
}

// Record adds one record of size bytes that took d.
func (w *Window) Record(d time.Duration, size int) {
	w.mu.Lock()
	w.now.Record(d)
	w.bytes += int64(size)
	w.mu.Unlock()
}

// Stats are the figures of one window or of a whole run.
type Stats struct {
	Records int64
	Bytes   int64
	Elapsed time.Duration
	Lat     Histogram
}

// RecordsPerSec is the record rate.
func (s Stats) RecordsPerSec() float64 { return float64(s.Records) / max(s.Elapsed.Seconds(), 1e-9) }

// MBPerSec is the byte rate in MiB/s, as Kafka's tools count a MB.
func (s Stats) MBPerSec() float64 {
	return float64(s.Bytes) / (1 << 20) / max(s.Elapsed.Seconds(), 1e-9)
}

// Snapshot returns the window since the last snapshot and starts a new one.
func (w *Window) Snapshot() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	s := Stats{Records: w.now.Count(), Bytes: w.bytes, Elapsed: now.Sub(w.start), Lat: w.now}
	w.total.Merge(&w.now)
	w.tbytes += w.bytes
	w.now, w.bytes, w.start = Histogram{}, 0, now
	return s
}

// Total is the whole run so far, the current window included.
func (w *Window) Total() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.total
	t.Merge(&w.now)
	return Stats{Records: t.Count(), Bytes: w.tbytes + w.bytes, Elapsed: time.Since(w.began), Lat: t}
}

// ProgressLine is kafka-producer-perf-test's line for a window:
//
//	50000 records sent, 9996.0 records/sec (0.95 MB/sec), 3.4 ms avg latency, 206.0 ms max latency.
func ProgressLine(s Stats) string {
	return fmt.Sprintf("%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.",
		s.Records, s.RecordsPerSec(), s.MBPerSec(), ms(s.Lat.Mean()), ms(s.Lat.Max()))
}

// SummaryLine is kafka-producer-perf-test's last line, with percentiles:
//
//	1000000 records sent, 99950.0 records/sec (9.53 MB/sec), 2.35 ms avg latency, 230.00 ms max latency, 1 ms 50th, 6 ms 95th, 13 ms 99th, 22 ms 99.9th.
func SummaryLine(s Stats) string {
	return fmt.Sprintf("%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.0f ms 50th, %.0f ms 95th, %.0f ms 99th, %.0f ms 99.9th.",
		s.Records, s.RecordsPerSec(), s.MBPerSec(), ms(s.Lat.Mean()), ms(s.Lat.Max()),
		ms(s.Lat.Quantile(0.50)), ms(s.Lat.Quantile(0.95)), ms(s.Lat.Quantile(0.99)), ms(s.Lat.Quantile(0.999)))
}

// kafkaTime is the tool's yyyy-MM-dd HH:mm:ss:SSS (Go's layouts know
// milliseconds only after a dot or a comma).
func kafkaTime(t time.Time) string {
	return fmt.Sprintf("%s:%03d", t.Format("2006-01-02 15:04:05"), t.Nanosecond()/int(time.Millisecond))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Report prints w's progress line to out every interval until stop is
// closed, then returns.
func Report(out io.Writer, w *Window, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			fmt.Fprintln(out, ProgressLine(w.Snapshot()))
		case <-stop:
			return
		}
	}
}

// ConsumerHeader and ConsumerLine are kafka-consumer-perf-test's output:
//
//	start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
const ConsumerHeader = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"

// ConsumerLine formats a consumer run: start and end, what was consumed,
// and the time spent joining the group (0 without one); the fetch rates
// leave that time out, as Kafka's tool does.
func ConsumerLine(start, end time.Time, records, bytes int64, rebalance time.Duration) string {
	total := end.Sub(start).Seconds()
	fetch := max(total-rebalance.Seconds(), 1e-9)
	mb := float64(bytes) / (1 << 20)
	return fmt.Sprintf("%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f",
		kafkaTime(start), kafkaTime(end), mb, mb/max(total, 1e-9), records, float64(records)/max(total, 1e-9),
		rebalance.Milliseconds(), int64(fetch*1000), mb/fetch, float64(records)/fetch)
}
