package diskbench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// BlockSize is the unit of the write benchmarks: a page, the smallest
// write the page cache and the device handle without a read first.
const BlockSize = 4 << 10

// Sequential is the order 0, 1, ..., n-1: block i of the file is the i-th
// written, as a log appends (§2.1.2).
func Sequential(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	return order
}

// Shuffled is a random permutation of the n blocks: every block written
// once, as in Sequential, so both orders leave the same bytes in the same
// file and only the order differs.
func Shuffled(n int, seed uint64) []int {
	order := Sequential(n)
	rand.New(rand.NewPCG(seed, seed)).Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// WriteBlocks writes block at position order[i]*len(block) for each i, with
// pwrite(2), and calls Datasync after every syncEvery bytes when syncEvery
// is positive (and once at the end if bytes are left unsynced): with 0 the
// writes end in the page cache; with a size they reach the device in the
// order and the amounts written.
func WriteBlocks(f *os.File, order []int, block []byte, syncEvery int) error {
	unsynced := 0
	for _, b := range order {
		if _, err := f.WriteAt(block, int64(b)*int64(len(block))); err != nil {
			return fmt.Errorf("write block %d: %w", b, err)
		}
		if unsynced += len(block); syncEvery > 0 && unsynced >= syncEvery {
			if err := Datasync(f); err != nil {
				return err
			}
			unsynced = 0
		}
	}
	if syncEvery > 0 && unsynced > 0 {
		return Datasync(f)
	}
	return nil
}

// Preallocate creates a file of size bytes at path with every byte written
// and on the device, so that later writes overwrite allocated blocks and an
// fdatasync has no metadata to write. fallocate would leave unwritten
// extents, which the first write converts: a cost the overwrite of a real
// file does not have.
func Preallocate(path string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("preallocate: %w", err)
	}
	chunk := make([]byte, 1<<20)
	for pos := int64(0); pos < size; pos += int64(len(chunk)) {
		if _, err := f.WriteAt(chunk[:min(int64(len(chunk)), size-pos)], pos); err != nil {
			f.Close()
			return nil, fmt.Errorf("preallocate %s: %w", path, err)
		}
	}
	if err := Datasync(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("preallocate: %w", err)
	}
	return f, nil
}

// errNoExactBatch: no value length gives a batch of the size asked for
// (varint lengths can jump over it).
var errNoExactBatch = errors.New("diskbench: no batch of exactly that size")

// Batch encodes a batch of exactly size bytes whose records carry values of
// valueSize bytes (the last one shorter or longer to make the size), so
// that a log append and a block write move the same bytes.
func Batch(size, valueSize int) ([]byte, error) {
	b := record.NewBatch(time.Now().UnixMilli())
	n := max(1, (size-record.HeaderSize)/(valueSize+10))
	for i := range n {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Value: make([]byte, valueSize)})
	}
	last := &b.Records[n-1]
	for range 4 {
		out, err := record.AppendBatch(nil, b)
		if err != nil {
			return nil, err
		}
		diff := size - len(out)
		if diff == 0 {
			return out, nil
		}
		if len(last.Value)+diff < 0 {
			break
		}
		last.Value = make([]byte, len(last.Value)+diff)
	}
	return nil, fmt.Errorf("%w: %d bytes of %d-byte values", errNoExactBatch, size, valueSize)
}
