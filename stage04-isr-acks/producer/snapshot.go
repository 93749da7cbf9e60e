package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// A producer snapshot is Kafka's <20-digit offset>.snapshot file beside a
// partition's segments: the producer state as of that offset, so that a
// restart reads the log only after it (Kafka's ProducerStateManager
// format, version 1). Like Kafka's, it keeps each producer's last batch
// below its offset only; the batches before that are rebuilt from the log
// when needed, and the batches at or after it are read from the log. A
// snapshot taken below the log end (a clean shutdown's, at the oldest
// batch a producer may still retry) is how the last five batches of every
// producer survive a restart in this format.
//
//	version   int16   1
//	crc       uint32  CRC-32C of everything after this field
//	count     int32   producers
//	count × {
//	  producerId            int64
//	  producerEpoch         int16
//	  lastSequence          int32
//	  lastOffset            int64
//	  offsetDelta           int32   lastOffset - the last batch's first offset
//	  timestamp             int64   the last batch's max timestamp
//	  coordinatorEpoch      int32   of the producer's last marker, -1: none
//	  currentTxnFirstOffset int64   its open transaction's first offset, -1: none
//	}
//
// A producer whose last word below offset was a marker (no batch of its
// epoch) is written with lastSequence -1 and lastOffset -1, as Kafka does,
// so that its epoch and coordinator epoch survive.
const (
	snapshotVersion   = 1
	snapshotEntrySize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	snapshotHeader    = 2 + 4 + 4
)

// ErrCorruptSnapshot: a snapshot that does not decode or whose CRC does
// not match; the caller ignores it and rebuilds from the log.
var ErrCorruptSnapshot = errors.New("producer: corrupt snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotFileName is the file of a snapshot taken at offset.
func SnapshotFileName(offset int64) string { return fmt.Sprintf("%020d.snapshot", offset) }

// SnapshotAt encodes the state as of offset: each producer with its last
// batch that ends below offset, by producer id; a producer with none is
// left out (its batches are read from the log at or after offset).
func (s *State) SnapshotAt(offset int64) []byte {
	s.mu.Lock()
	pids := make([]int64, 0, len(s.producers))
	lasts := map[int64]Batch{}
	for pid, e := range s.producers {
		for i := len(e.Batches) - 1; i >= 0; i-- {
			if e.Batches[i].LastOffset < offset {
				pids = append(pids, pid)
				lasts[pid] = e.Batches[i]
				break
			}
		}
		if _, ok := lasts[pid]; !ok && len(e.Batches) == 0 && (e.CoordinatorEpoch >= 0 || e.TxnFirstOffset >= 0 && e.TxnFirstOffset < offset) {
			pids = append(pids, pid)
			lasts[pid] = Batch{FirstSeq: NoSequence, LastSeq: NoSequence, FirstOffset: -1, LastOffset: -1, Timestamp: e.LastTimestamp}
		}
	}
	slices.Sort(pids)
	b := make([]byte, snapshotHeader, snapshotHeader+len(pids)*snapshotEntrySize)
	binary.BigEndian.PutUint16(b, snapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32(len(pids)))
	for _, pid := range pids {
		e, last := s.producers[pid], lasts[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(last.LastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(last.LastOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(last.LastOffset-last.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(last.Timestamp))
		b = binary.BigEndian.AppendUint32(b, uint32(e.CoordinatorEpoch))
		txnFirst := int64(-1)
		if e.TxnFirstOffset >= 0 && e.TxnFirstOffset < offset {
			txnFirst = e.TxnFirstOffset
		}
		b = binary.BigEndian.AppendUint64(b, uint64(txnFirst))
	}
	s.mu.Unlock()
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
	return b
}

// LoadSnapshot replaces the state with a snapshot's producers, each with
// its last batch.
func (s *State) LoadSnapshot(b []byte) error {
	if len(b) < snapshotHeader {
		return fmt.Errorf("%w: %d bytes", ErrCorruptSnapshot, len(b))
	}
	if v := binary.BigEndian.Uint16(b); v != snapshotVersion {
		return fmt.Errorf("%w: version %d", ErrCorruptSnapshot, v)
	}
	if want, got := binary.BigEndian.Uint32(b[2:]), crc32.Checksum(b[6:], castagnoli); want != got {
		return fmt.Errorf("%w: CRC %08x, computed %08x", ErrCorruptSnapshot, want, got)
	}
	n := int(binary.BigEndian.Uint32(b[6:]))
	body := b[snapshotHeader:]
	if n < 0 || len(body) != n*snapshotEntrySize {
		return fmt.Errorf("%w: %d producers in %d bytes", ErrCorruptSnapshot, n, len(body))
	}
	producers := make(map[int64]*Entry, n)
	open := map[int64]int64{}
	for i := range n {
		e := body[i*snapshotEntrySize:]
		pid := int64(binary.BigEndian.Uint64(e))
		epoch := int16(binary.BigEndian.Uint16(e[8:]))
		lastSeq := int32(binary.BigEndian.Uint32(e[10:]))
		lastOffset := int64(binary.BigEndian.Uint64(e[14:]))
		delta := int32(binary.BigEndian.Uint32(e[22:]))
		ts := int64(binary.BigEndian.Uint64(e[26:]))
		coordinatorEpoch := int32(binary.BigEndian.Uint32(e[34:]))
		txnFirst := int64(binary.BigEndian.Uint64(e[38:]))
		entry := &Entry{ProducerID: pid, Epoch: epoch, TxnFirstOffset: -1, CoordinatorEpoch: coordinatorEpoch, LastTimestamp: ts}
		if txnFirst >= 0 {
			entry.TxnFirstOffset, open[pid] = txnFirst, txnFirst
		}
		if lastSeq != NoSequence || lastOffset >= 0 {
			firstSeq := int64(lastSeq) - int64(delta)
			if firstSeq < 0 { // the batch wrapped from MaxInt32 to 0
				firstSeq += 1 << 31
			}
			entry.Batches = []Batch{{FirstSeq: int32(firstSeq), LastSeq: lastSeq, FirstOffset: lastOffset - int64(delta),
				LastOffset: lastOffset, Timestamp: ts}}
		}
		producers[pid] = entry
	}
	s.mu.Lock()
	s.producers, s.open, s.unreplicated = producers, open, nil
	s.mu.Unlock()
	return nil
}
