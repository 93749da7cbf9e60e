package zerocopy_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage06-performance/zerocopy"
)

// BenchmarkFetchZeroCopy measures what a broker spends to serve consumers'
// fetches of records already in the page cache, sending log regions with
// sendfile(2) ("sendfile") against reading them into memory and writing
// them ("copy", stage 02's CopyRegionSender), in the same run: 64 MiB in
// one partition, four connections each fetching 8 MiB a request from
// offsets spread over the log, reading the answers into a buffer and
// throwing them away (no decoding: the client costs the same both ways).
//
// MB/s is the bytes served a second; MB/cpu-s the bytes served per second
// of CPU of the whole process, broker and clients together (getrusage);
// the clients' share (reading from a socket) is the same both ways, so
// the ratio understates the broker's saving.
//
//	go test -run '^$' -bench BenchmarkFetchZeroCopy -benchtime 2000x -count 3 ./zerocopy/
func BenchmarkFetchZeroCopy(b *testing.B) {
	for _, s := range []struct {
		name   string
		sender network.RegionSender
	}{{"sendfile", zerocopy.SendfileRegionSender{}}, {"copy", network.CopyRegionSender{}}} {
		b.Run(s.name, func(b *testing.B) {
			addr := startBroker(b, s.sender)
			end := fill(b, addr, 64<<20)
			const conns = 4
			var wg sync.WaitGroup
			var mu sync.Mutex
			var served int64
			per := (b.N + conns - 1) / conns
			cpu0 := cpuTime()
			b.ResetTimer()
			start := time.Now()
			for c := range conns {
				wg.Go(func() {
					n := fetchLoop(b, addr, per, int64(c)*end/conns, end)
					mu.Lock()
					served += n
					mu.Unlock()
				})
			}
			wg.Wait()
			b.StopTimer()
			wall, cpu := time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds()
			b.ReportMetric(float64(served)/1e6/wall, "MB/s")
			b.ReportMetric(float64(served)/1e6/cpu, "MB/cpu-s")
		})
	}
}

// startBroker starts stage 02's single broker writing file regions with
// sender, on a port of its own.
func startBroker(b *testing.B, sender network.RegionSender) string {
	b.Helper()
	logger := slog.New(slog.DiscardHandler)
	cfg, err := broker.ParseConfig(map[string]string{"log.dirs": b.TempDir(), "listeners": "PLAINTEXT://127.0.0.1:0",
		"num.partitions": "1"}, logger)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Network.RegionSender = sender
	br, err := broker.New(cfg, broker.Options{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = br.Shutdown(ctx)
	})
	if _, err := br.Store().CreateTopic("bench", 1, nil); err != nil {
		b.Fatal(err)
	}
	return br.Addr().String()
}

// fill produces size bytes of 1 KiB records and returns the log end offset.
func fill(b *testing.B, addr string, size int) int64 {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 1024)
	n := size / len(value)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for range n {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return int64(n)
}

// fetchLoop sends requests Fetches of partition 0 on one connection,
// starting at from and moving on by what each answer held (back to 0 at
// end), reading each answer whole into one buffer; it returns the bytes
// read.
func fetchLoop(b *testing.B, addr string, requests int, from, end int64) int64 {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer conn.Close()
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	buf := make([]byte, 1<<20)
	var served int64
	offset := from
	for i := range requests {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 11, -1, 0, 1, 52428800
		t := kmsg.NewFetchRequestTopic()
		t.Topic = "bench"
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LogStartOffset = 0, offset, 8<<20, -1, -1
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		if _, err := conn.Write(formatter.AppendRequest(nil, req, int32(i))); err != nil {
			b.Error(err)
			return served
		}
		if _, err := io.ReadFull(conn, buf[:4]); err != nil {
			b.Error(err)
			return served
		}
		size := int64(binary.BigEndian.Uint32(buf[:4]))
		for left := size; left > 0; {
			r, err := conn.Read(buf[:min(left, int64(len(buf)))])
			if err != nil {
				b.Error(err)
				return served
			}
			left -= int64(r)
		}
		served += size
		offset += 8 << 10 // about 8 MiB of 1 KiB records
		if offset >= end-(8<<10) {
			offset = 0
		}
	}
	return served
}

// cpuTime is the CPU the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
