package record

import "fmt"

// Recompress appends to dst the batch at the front of batch with its
// records compressed with c instead (CodecNone: uncompressed), as Kafka's
// LogValidator rebuilds a produced batch whose codec is not its topic's
// compression.type. Everything else is kept: base offset and last offset
// delta, leader epoch, the other attribute bits, timestamps, the producer
// id, epoch and base sequence, and each record as it was. The records are
// decoded within maxRecordBytes (0: DefaultMaxRecordBytes); a batch that
// does not decode is an error, and dst is returned unchanged.
func Recompress(dst, batch []byte, c Codec, maxRecordBytes int) ([]byte, error) {
	h, err := ReadHeader(batch)
	if err != nil {
		return dst, err
	}
	if h.Size() > len(batch) {
		return dst, fmt.Errorf("%w: length field says %d bytes, only %d present", ErrLengthMismatch, h.Size(), len(batch))
	}
	r := GetReader(maxRecordBytes)
	defer PutReader(r)
	it, err := r.Records(batch[:h.Size()])
	if err != nil {
		return dst, err
	}
	b := &Batch{BaseOffset: h.BaseOffset, PartitionLeaderEpoch: h.PartitionLeaderEpoch, Attributes: h.Attributes.WithCodec(c),
		FirstTimestamp: h.FirstTimestamp, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
		BaseSequence: h.BaseSequence, LastOffsetDelta: h.LastOffsetDelta, Records: make([]Record, 0, h.NumRecords)}
	for it.Next() {
		rec := *it.Record() // the record aliases the reader's buffer, which lives until PutReader
		rec.Headers = append([]Header(nil), rec.Headers...)
		b.Records = append(b.Records, rec)
	}
	if err := it.Err(); err != nil {
		return dst, err
	}
	return AppendBatch(dst, b)
}
