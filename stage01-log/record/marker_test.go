package record

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A marker batch is what a Kafka client reads as one: franz-go's decoding
// of the batch, its control record key and its EndTransactionMarker value
// agree with ours, and ReadMarker reads it back.
func TestAMarkerBatchIsKafkasControlBatch(t *testing.T) {
	for _, commit := range []bool{false, true} {
		m := Marker{ProducerID: 4242, ProducerEpoch: 7, Commit: commit, CoordinatorEpoch: 3}
		batch := AppendMarker(nil, m, 1_700_000_000_000)
		h, err := Validate(batch)
		require.NoError(t, err)
		require.True(t, h.Attributes.Control())
		require.True(t, h.Attributes.Transactional())
		require.Equal(t, int32(NoSequence), h.BaseSequence)
		require.Equal(t, int32(1), h.NumRecords)

		var kb kmsg.RecordBatch
		require.NoError(t, kb.ReadFrom(batch))
		require.Equal(t, int16(0x30), kb.Attributes)
		require.Equal(t, int64(4242), kb.ProducerID)
		require.Equal(t, int16(7), kb.ProducerEpoch)
		it := NewRecordIterator(kb.Records, kb.NumRecords)
		require.True(t, it.Next())
		var key kmsg.ControlRecordKey
		require.NoError(t, key.ReadFrom(it.Record().Key))
		require.Equal(t, int16(0), key.Version)
		want := kmsg.ControlRecordKeyTypeAbort
		if commit {
			want = kmsg.ControlRecordKeyTypeCommit
		}
		require.Equal(t, want, key.Type)
		var value kmsg.EndTxnMarker
		require.NoError(t, value.ReadFrom(it.Record().Value))
		require.Equal(t, int32(3), value.CoordinatorEpoch)

		got, err := ReadMarker(&h, batch)
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
}

// A marker written by another implementation (kmsg's key and value
// encodings, in a batch built by ours) is read; a data batch, an unknown
// control type and a short value are ErrInvalidRecord.
func TestReadMarkerRefusesWhatIsNotAMarker(t *testing.T) {
	key := kmsg.ControlRecordKey{Type: kmsg.ControlRecordKeyTypeCommit}
	value := kmsg.EndTxnMarker{CoordinatorEpoch: 9}
	build := func(attrs Attributes, k, v []byte) ([]byte, BatchHeader) {
		b := NewBatch(1, Record{Key: k, Value: v})
		b.Attributes, b.ProducerID, b.ProducerEpoch = attrs, 1, 0
		out, err := AppendBatch(nil, b)
		require.NoError(t, err)
		h, err := ReadHeader(out)
		require.NoError(t, err)
		return out, h
	}
	batch, h := build(ControlAttributes, key.AppendTo(nil), value.AppendTo(nil))
	m, err := ReadMarker(&h, batch)
	require.NoError(t, err)
	require.Equal(t, Marker{ProducerID: 1, Commit: true, CoordinatorEpoch: 9}, m)

	for name, c := range map[string]struct {
		attrs Attributes
		k, v  []byte
	}{
		"data batch":    {transactionalFlag, key.AppendTo(nil), value.AppendTo(nil)},
		"unknown type":  {ControlAttributes, []byte{0, 0, 0, 5}, value.AppendTo(nil)},
		"key version 1": {ControlAttributes, []byte{0, 1, 0, 1}, value.AppendTo(nil)},
		"short value":   {ControlAttributes, key.AppendTo(nil), []byte{0, 0, 0}},
		"no key":        {ControlAttributes, nil, value.AppendTo(nil)},
	} {
		batch, h := build(c.attrs, c.k, c.v)
		_, err := ReadMarker(&h, batch)
		require.ErrorIs(t, err, ErrInvalidRecord, name)
	}
}
