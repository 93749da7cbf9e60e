package faults

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"

	"github.com/kafkaworkbook/workbook/final/cluster"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// brokerLogDir is log.dirs inside a broker's container (the image's
// setting), on the broker's data volume mounted at /var/lib/kafka.
const brokerLogDir = "/var/lib/kafka/data"

// BatchDigest is one batch of a replica's log: its offsets and the SHA-256
// of its bytes, all of them (offset, length, leader epoch, CRC, records):
// two replicas hold the same batch only if every byte is the same.
type BatchDigest struct {
	BaseOffset, LastOffset int64
	Sum                    [sha256.Size]byte
	// From the header, to explain a finding: who wrote the batch, under
	// which leader.
	LeaderEpoch   int32
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// String describes the batch as dumplog does.
func (d BatchDigest) String() string {
	return fmt.Sprintf("batch %d-%d (partitionLeaderEpoch %d, producerId %d, producerEpoch %d, baseSequence %d)",
		d.BaseOffset, d.LastOffset, d.LeaderEpoch, d.ProducerID, d.ProducerEpoch, d.BaseSequence)
}

// ReplicaLog reads the batches of partition topic-p in broker b's log
// directory, every segment in offset order, with stage 01's batch reader
// (record.PeekSize for the size, record.Validate for the header and CRC):
// the files are the broker's own, read from its data volume on this
// machine (the engine's volume directory, readable by root) or, failing
// that, copied out of the container through the engine's API. It stops at
// a torn or invalid batch (one being written as we read).
func ReplicaLog(ctx context.Context, c *cluster.Cluster, b cluster.Node, topic string, p int32) ([]BatchDigest, error) {
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("faults: Docker client: %w", err)
	}
	defer cli.Close()
	dir := fmt.Sprintf("%s-%d", topic, p)
	var out []BatchDigest
	// The volume <cluster>-broker-<id>-data is mounted at /var/lib/kafka.
	vol, err := cli.VolumeInspect(ctx, b.Name+"-data", client.VolumeInspectOptions{})
	if err == nil {
		local := filepath.Join(vol.Volume.Mountpoint, "data", dir)
		if entries, err := os.ReadDir(local); err == nil {
			for _, e := range entries { // sorted by name: zero-padded base offsets
				if !strings.HasSuffix(e.Name(), ".log") {
					continue
				}
				f, err := os.Open(filepath.Join(local, e.Name()))
				if err != nil {
					return nil, err
				}
				out, err = appendDigests(out, f)
				f.Close()
				if err != nil {
					return nil, fmt.Errorf("faults: %s %s/%s: %w", b.Name, dir, e.Name(), err)
				}
			}
			return out, nil
		}
	}
	res, err := cli.CopyFromContainer(ctx, b.Name, client.CopyFromContainerOptions{SourcePath: path.Join(brokerLogDir, dir)})
	if err != nil {
		return nil, fmt.Errorf("faults: copy %s from %s: %w", dir, b.Name, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	for { // the archive lists a directory's files in name order
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("faults: copy %s from %s: %w", dir, b.Name, err)
		}
		if strings.HasSuffix(h.Name, ".log") {
			if out, err = appendDigests(out, tr); err != nil {
				return nil, fmt.Errorf("faults: %s %s: %w", b.Name, h.Name, err)
			}
		}
	}
}

// appendDigests appends the digest of every whole, valid batch of the
// segment in r.
func appendDigests(out []BatchDigest, r io.Reader) ([]BatchDigest, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var batch []byte
	for {
		head, err := br.Peek(record.LogOverhead)
		if len(head) < record.LogOverhead {
			if errors.Is(err, io.EOF) {
				return out, nil // the end, or a torn length field
			}
			return out, err
		}
		_, size, err := record.PeekSize(head)
		if err != nil {
			return out, nil // not a batch: a preallocated or torn tail
		}
		if cap(batch) < size {
			batch = make([]byte, size)
		}
		batch = batch[:size]
		if _, err := io.ReadFull(br, batch); err != nil {
			return out, nil // a batch being written
		}
		h, err := record.Validate(batch)
		if err != nil {
			return out, nil
		}
		out = append(out, BatchDigest{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Sum: sha256.Sum256(batch),
			LeaderEpoch: h.PartitionLeaderEpoch, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence})
	}
}

// ReplicaComparison is the comparison of one partition's replicas up to
// its high watermark.
type ReplicaComparison struct {
	Partition     int32
	HighWatermark int64
	Batches       int // batches below the high watermark (the leader's)
	Replicas      []int32
	Err           string // empty when every replica holds the same batches
}

// CompareReplicas reads partition p's log on each of its replicas and
// checks that the batches below hw are the same, byte for byte, on every
// one, and cover [first offset, hw) without a hole.
func CompareReplicas(ctx context.Context, c *cluster.Cluster, topic string, p int32, replicas []int32, leader int32, hw int64) ReplicaComparison {
	rc := ReplicaComparison{Partition: p, HighWatermark: hw, Replicas: replicas}
	logs := map[int32][]BatchDigest{}
	for _, r := range replicas {
		ds, err := ReplicaLog(ctx, c, c.Broker(int(r)), topic, p)
		if err != nil {
			rc.Err = err.Error()
			return rc
		}
		var below []BatchDigest
		for _, d := range ds {
			if d.BaseOffset < hw {
				below = append(below, d)
			}
		}
		logs[r] = below
	}
	ref := logs[leader]
	rc.Batches = len(ref)
	if hw > 0 && (len(ref) == 0 || ref[len(ref)-1].LastOffset != hw-1) {
		rc.Err = fmt.Sprintf("leader %d's batches end before the high watermark %d", leader, hw)
		return rc
	}
	for i := 1; i < len(ref); i++ {
		if ref[i].BaseOffset != ref[i-1].LastOffset+1 {
			rc.Err = fmt.Sprintf("leader %d: a hole between offsets %d and %d", leader, ref[i-1].LastOffset, ref[i].BaseOffset)
			return rc
		}
	}
	for _, r := range replicas {
		got := logs[r]
		for i := range max(len(ref), len(got)) {
			switch {
			case i >= len(got):
				rc.Err = fmt.Sprintf("replica %d lacks the batches from offset %d (of %d below the high watermark)", r, ref[i].BaseOffset, len(ref))
			case i >= len(ref):
				rc.Err = fmt.Sprintf("replica %d has batch %d-%d the leader lacks", r, got[i].BaseOffset, got[i].LastOffset)
			case got[i] != ref[i]:
				rc.Err = fmt.Sprintf("replica %d's batch at offset %d differs from leader %d's (offsets %d-%d vs %d-%d)",
					r, got[i].BaseOffset, leader, got[i].BaseOffset, got[i].LastOffset, ref[i].BaseOffset, ref[i].LastOffset)
			}
			if rc.Err != "" {
				return rc
			}
		}
	}
	return rc
}
