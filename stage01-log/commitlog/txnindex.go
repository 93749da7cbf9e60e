package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
)

// The aborted transaction index (Kafka's TransactionIndex, the .txnindex
// file beside a segment): one entry per transaction aborted by a marker in
// this segment, so that a read_committed fetch can tell its consumer which
// producers' records to drop, and from which offset, without reading the
// log twice. Entries are appended in the order of their markers:
//
//	version           int16  0
//	producerId        int64
//	firstOffset       int64  the transaction's first record
//	lastOffset        int64  the ABORT marker's offset
//	lastStableOffset  int64  the partition's last stable offset once this
//	                         transaction ended (the first offset of the
//	                         oldest transaction still open, or lastOffset+1)
//
// The log does not know producers: the layer that keeps producer state
// (stage 04) computes each entry when it appends or replicates an ABORT
// marker and adds it here (AddAbortedTxn). The index follows its segment
// through truncation, retention, recovery and compaction; after a crash the
// entries whose markers did not survive are dropped, and stage 04's replay
// of the log since its producer snapshot adds back any that are missing.
const (
	txnIndexSuffix    = ".txnindex"
	txnIndexEntrySize = 2 + 8 + 8 + 8 + 8
	txnIndexVersion   = 0
)

// AbortedTxn is one aborted transaction of a partition.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64 // the ABORT marker's offset
	LastStableOffset int64
}

// txnIndex is a segment's .txnindex: its entries, read from the file on
// first use and kept in memory (a few per segment at most, in practice),
// and the file, written on each change. Safe for concurrent use.
type txnIndex struct {
	mu      sync.Mutex
	loaded  bool         // entries reflect the file. Protected by mu.
	entries []AbortedTxn // by LastOffset. Protected by mu.
}

// txnEntries returns the segment's aborted transactions, reading the file
// on first use. A torn tail (a crash mid-append) is dropped, as is an
// entry of an unknown version and everything after it.
func (s *segment) txnEntries() ([]AbortedTxn, error) {
	s.txns.mu.Lock()
	defer s.txns.mu.Unlock()
	if err := s.loadTxnsLocked(); err != nil {
		return nil, err
	}
	return s.txns.entries, nil
}

func (s *segment) loadTxnsLocked() error {
	if s.txns.loaded {
		return nil
	}
	data, err := os.ReadFile(s.path(txnIndexSuffix))
	if errors.Is(err, os.ErrNotExist) {
		s.txns.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("read transaction index of segment %s: %w", segmentName(s.baseOffset), err)
	}
	var entries []AbortedTxn
	for len(data) >= txnIndexEntrySize {
		if v := binary.BigEndian.Uint16(data); v != txnIndexVersion {
			s.logger.Warn("transaction index entry of unknown version; dropping the rest",
				"segment", segmentName(s.baseOffset), "version", v)
			break
		}
		entries = append(entries, AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(data[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(data[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(data[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(data[26:])),
		})
		data = data[txnIndexEntrySize:]
	}
	s.txns.entries, s.txns.loaded = entries, true
	return nil
}

func appendTxnEntry(b []byte, t AbortedTxn) []byte {
	b = binary.BigEndian.AppendUint16(b, txnIndexVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(t.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(t.LastStableOffset))
}

// addTxn adds an entry. One already there for the same marker (a replay
// after a restart) is left as it is. An entry after the last is appended
// to the file; one that belongs before it (a replay filling a gap) rewrites
// the file.
func (s *segment) addTxn(t AbortedTxn) error {
	s.txns.mu.Lock()
	defer s.txns.mu.Unlock()
	if err := s.loadTxnsLocked(); err != nil {
		return err
	}
	i, found := slices.BinarySearchFunc(s.txns.entries, t.LastOffset, func(e AbortedTxn, last int64) int {
		return cmpInt64(e.LastOffset, last)
	})
	if found {
		return nil
	}
	if i == len(s.txns.entries) {
		f, err := os.OpenFile(s.path(txnIndexSuffix), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("transaction index of segment %s: %w", segmentName(s.baseOffset), err)
		}
		_, err = f.Write(appendTxnEntry(nil, t))
		if err = errors.Join(err, f.Close()); err != nil {
			return fmt.Errorf("transaction index of segment %s: %w", segmentName(s.baseOffset), err)
		}
		s.txns.entries = append(s.txns.entries, t)
		return nil
	}
	return s.writeTxnsLocked(slices.Insert(slices.Clone(s.txns.entries), i, t))
}

// truncateTxns drops the entries whose markers are at or after offset.
func (s *segment) truncateTxns(offset int64) error {
	s.txns.mu.Lock()
	defer s.txns.mu.Unlock()
	if err := s.loadTxnsLocked(); err != nil {
		return err
	}
	n := len(s.txns.entries)
	for n > 0 && s.txns.entries[n-1].LastOffset >= offset {
		n--
	}
	if n == len(s.txns.entries) {
		return nil
	}
	return s.writeTxnsLocked(s.txns.entries[:n:n])
}

// writeTxnsLocked replaces the file's entries (crash-safely: a rename).
// An empty index leaves no file, unless the segment is a cleaned one, whose
// file always exists so that a swap can tell its index from the old
// segment's (cleaner_swap.go).
func (s *segment) writeTxnsLocked(entries []AbortedTxn) error {
	path := s.path(txnIndexSuffix)
	if len(entries) == 0 && s.fileSuffix == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("transaction index of segment %s: %w", segmentName(s.baseOffset), err)
		}
		s.txns.entries = nil
		return nil
	}
	b := make([]byte, 0, len(entries)*txnIndexEntrySize)
	for _, e := range entries {
		b = appendTxnEntry(b, e)
	}
	if err := WriteFileAtomic(path, b); err != nil {
		return fmt.Errorf("transaction index of segment %s: %w", segmentName(s.baseOffset), err)
	}
	s.txns.entries = entries
	return nil
}

// syncTxns fsyncs the index file, if there is one: a flush makes the
// segment's data and all its indexes durable together.
func (s *segment) syncTxns() error {
	s.txns.mu.Lock()
	defer s.txns.mu.Unlock()
	if s.txns.loaded && len(s.txns.entries) == 0 {
		return nil
	}
	f, err := os.Open(s.path(txnIndexSuffix))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.Join(syncFile(f), f.Close())
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AddAbortedTxn records an aborted transaction in the index of the segment
// that holds its ABORT marker (t.LastOffset), as Kafka's
// LogSegment.updateTxnIndex. The producer-state layer calls it after it
// appends or replicates the marker, and again when it replays the log
// after a restart: an entry already there for that marker is kept. A
// marker outside the log is an error.
func (l *Log) AddAbortedTxn(t AbortedTxn) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	if t.LastOffset >= l.nextOffset || t.FirstOffset > t.LastOffset {
		return fmt.Errorf("%w: aborted transaction [%d, %d] of producer %d, log end %d",
			ErrOffsetOutOfRange, t.FirstOffset, t.LastOffset, t.ProducerID, l.nextOffset)
	}
	i := l.segmentIndexFor(t.LastOffset)
	if i < 0 {
		return fmt.Errorf("%w: aborted transaction marker %d is below the log start", ErrOffsetOutOfRange, t.LastOffset)
	}
	return l.segments[i].addTxn(t)
}

// AbortedTxns lists the aborted transactions that overlap [from, upTo)
// (Kafka's UnifiedLog.collectAbortedTransactions). A read_committed fetch
// from offset from that returns records below upTo sends them to its
// consumer, which drops those producers' records from each transaction's
// first offset until its marker.
func (l *Log) AbortedTxns(from, upTo int64) ([]AbortedTxn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	// exercise 01.6: collect the aborted transactions a read_committed fetch from offset from up to upTo must name
	// hint: see each transaction as the span from its first record to its marker, and remember where its index entry lives: in the segment that holds its marker
	// tests: TestAbortedTxnsOverlapTheFetchedRange, TestTheTxnIndexIsKafkasFileFormat, TestTruncationRemovesTheEntriesOfRemovedMarkers
	var out []AbortedTxn
	for i := max(l.segmentIndexFor(from), 0); i < len(l.segments); i++ {
		entries, err := l.segments[i].txnEntries()
		if err != nil {
			return nil, err
		}
		complete := false
		for _, e := range entries {
			if e.LastOffset >= from && e.FirstOffset < upTo {
				out = append(out, e)
			}
			// Kafka's early stop: when this transaction ended, every
			// transaction that started below upTo had ended too, so no
			// later marker can end one of them.
			complete = complete || e.LastStableOffset >= upTo
		}
		if complete {
			break
		}
	}
	return out, nil
	// end exercise
}
