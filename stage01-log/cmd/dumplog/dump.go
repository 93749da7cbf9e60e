package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// dump prints one file, choosing the format by its suffix.
func dump(w io.Writer, path string, printData bool) error {
	fmt.Fprintf(w, "Dumping %s\n", path)
	switch filepath.Ext(path) {
	case ".log":
		return dumpLog(w, path, printData)
	case ".index":
		entries, err := commitlog.ReadIndexFile(path)
		for _, e := range entries {
			fmt.Fprintf(w, "offset: %d position: %d\n", e.Offset, e.Position)
		}
		return err
	case ".timeindex":
		entries, err := commitlog.ReadTimeIndexFile(path)
		for _, e := range entries {
			fmt.Fprintf(w, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
		}
		return err
	}
	return fmt.Errorf("%s: not a .log, .index or .timeindex file", path)
}

// dumpLog walks a segment batch by batch with plain sequential reads: a tool
// should depend on the format alone, not on the log that wrote it.
func dumpLog(w io.Writer, path string, printData bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64); err == nil {
		fmt.Fprintf(w, "Log starting offset: %d\n", base)
	}

	r := bufio.NewReaderSize(f, 1<<20)
	var position int64
	var batch []byte
	var records record.Reader
	var corrupt []string // "offset X at position Y", the batches whose CRC fails
	defer func() {
		if len(corrupt) > 0 {
			fmt.Fprintf(w, "Found %d corrupt batch(es) in %s: %s\n", len(corrupt), filepath.Base(path), strings.Join(corrupt, "; "))
		}
	}()
	for {
		head, err := r.Peek(record.LogOverhead)
		if errors.Is(err, io.EOF) && len(head) == 0 {
			return nil
		}
		_, size, perr := record.PeekSize(head)
		if err != nil || perr != nil || int64(size) > fi.Size()-position {
			break // a torn or unreadable batch: report the rest as invalid
		}
		if cap(batch) < size {
			batch = make([]byte, size)
		}
		batch = batch[:size]
		if _, err := io.ReadFull(r, batch); err != nil {
			return fmt.Errorf("%s at position %d: %w", path, position, err)
		}
		h, verr := record.Validate(batch)
		if errors.Is(verr, record.ErrBadMagic) || errors.Is(verr, record.ErrTooShort) {
			break
		}
		printBatch(w, &h, position, verr == nil)
		if verr != nil {
			// A batch whose bytes changed after they were written: its
			// CRC no longer matches. Consumers stop here (they check the
			// CRC); the chapter says what an operator can do.
			fmt.Fprintf(w, "| corrupt batch at position %d: %v\n", position, verr)
			corrupt = append(corrupt, fmt.Sprintf("baseOffset %d at position %d", h.BaseOffset, position))
		}
		if printData {
			printRecords(w, &h, batch, &records)
		}
		position += int64(size)
	}
	if trailing := fi.Size() - position; trailing > 0 {
		fmt.Fprintf(w, "Found %d invalid bytes at the end of %s\n", trailing, filepath.Base(path))
	}
	return nil
}

func printBatch(w io.Writer, h *record.BatchHeader, position int64, valid bool) {
	lastSequence := int32(-1)
	if h.BaseSequence >= 0 {
		lastSequence = h.BaseSequence + h.LastOffsetDelta
	}
	fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d "+
		"producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t position: %d %s: %d "+
		"size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		h.BaseOffset, h.LastOffset(), h.NumRecords, h.BaseSequence, lastSequence, h.ProducerID,
		h.ProducerEpoch, h.PartitionLeaderEpoch, h.Attributes.Transactional(), h.Attributes.Control(), position,
		h.Attributes.TimestampType(), h.MaxTimestamp, h.Size(), h.Magic, h.Attributes.Codec(), h.CRC, valid)
}

// printRecords prints a batch's records, decompressing them if need be.
func printRecords(w io.Writer, h *record.BatchHeader, batch []byte, records *record.Reader) {
	it, err := records.Records(batch)
	if err != nil {
		fmt.Fprintf(w, "| records unreadable: %v\n", err)
		return
	}
	for it.Next() {
		rec := it.Record()
		sequence := int32(-1)
		if h.BaseSequence >= 0 {
			sequence = h.BaseSequence + rec.OffsetDelta
		}
		keys := make([]string, len(rec.Headers))
		for i, hd := range rec.Headers {
			keys[i] = string(hd.Key)
		}
		fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]",
			h.BaseOffset+int64(rec.OffsetDelta), h.Attributes.TimestampType(), h.FirstTimestamp+rec.TimestampDelta,
			nullableLen(rec.Key), nullableLen(rec.Value), sequence, strings.Join(keys, ","))
		if rec.Key != nil {
			fmt.Fprintf(w, " key: %s", rec.Key)
		}
		if rec.Value != nil {
			fmt.Fprintf(w, " payload: %s", rec.Value)
		}
		fmt.Fprintln(w)
	}
	if err := it.Err(); err != nil {
		fmt.Fprintf(w, "| records unreadable: %v\n", err)
	}
}

func nullableLen(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}
