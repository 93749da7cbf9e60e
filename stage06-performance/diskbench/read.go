package diskbench

import (
	"fmt"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// ReadLog reads the whole log in order the way a fetch does: Log.Read at
// the next offset returns a region of a segment file (index lookup and a
// short scan), the region is read into buf with pread, and the whole
// batches in it give the next offset. A batch cut off at the end of buf is
// read again by the next call, as a consumer fetches it again. It returns
// the bytes of whole batches read: the log's size when nothing is appended
// meanwhile. buf must hold the largest batch.
func ReadLog(l *commitlog.Log, buf []byte) (int64, error) {
	var total int64
	for off, end := l.StartOffset(), l.EndOffset(); off < end; {
		r, err := l.Read(off, len(buf))
		if err != nil {
			return total, err
		}
		if r.Size == 0 {
			break
		}
		if r.Size > int64(len(buf)) {
			return total, fmt.Errorf("read log at offset %d: a %d-byte batch does not fit the %d-byte buffer", off, r.Size, len(buf))
		}
		n, err := r.File.ReadAt(buf[:r.Size], r.Pos)
		if int64(n) < r.Size {
			return total, fmt.Errorf("read log at offset %d: %w", off, err)
		}
		whole, next := 0, off
		for whole+record.HeaderSize <= n {
			h, err := record.ReadHeader(buf[whole:n])
			if err != nil {
				return total, fmt.Errorf("read log at offset %d: %w", off, err)
			}
			if whole+h.Size() > n {
				break
			}
			whole += h.Size()
			next = h.NextOffset()
		}
		total += int64(whole)
		off = next
	}
	return total, nil
}
