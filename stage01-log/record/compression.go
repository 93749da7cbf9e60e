package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The codecs of seed §2.1.6. A compressed batch keeps its 61-byte header as
// it is and compresses its records, back to back, as one blob:
//
//	header (61 bytes, plain) | codec(record 0 | record 1 | ... | record n-1)
//
// Each codec uses the framing Kafka's Java client writes, so any Kafka
// client reads what AppendCompressed writes:
//
//	gzip    a gzip stream (RFC 1952)
//	snappy  xerial's snappy-java stream: an 8-byte magic, two int32
//	        versions, then blocks of int32 length + raw snappy. Readers
//	        also take a single raw snappy block, which librdkafka, franz-go
//	        and Sarama write.
//	lz4     an LZ4 frame (the standard one; Kafka's pre-0.10 lz4 had a
//	        broken header checksum, but magic 2 batches never do)
//	zstd    a zstd frame (Kafka 2.1, KIP-110)
//
// Decompression is bounded: a producer's few kilobytes can claim gigabytes
// once inflated (a "zip bomb"), so AppendDecompressed stops, with
// ErrTooLarge, before appending more than a limit the caller chooses.

// Errors of the codecs.
var (
	// ErrUnknownCodec: the attributes name codec 5, 6 or 7, which Kafka
	// never defined.
	ErrUnknownCodec = errors.New("record: unknown compression codec")
	// ErrCorruptCompression: the codec cannot decode the records.
	ErrCorruptCompression = errors.New("record: corrupt compressed records")
	// ErrTooLarge: the records inflate past the caller's limit.
	ErrTooLarge = errors.New("record: decompressed records exceed the limit")
)

// Known reports whether c is one of Kafka's codecs.
func (c Codec) Known() bool { return c >= CodecNone && c <= CodecZstd }

// AppendCompressed appends src compressed with c to dst. CodecNone appends
// src as it is.
func AppendCompressed(dst, src []byte, c Codec) ([]byte, error) {
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		return appendStream(dst, src, w)
	case CodecSnappy:
		return appendXerial(dst, src), nil
	case CodecLZ4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		return appendStream(dst, src, w)
	case CodecZstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
}

// resettableWriter is a pooled compressing writer (gzip, lz4).
type resettableWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// appendStream compresses src through w into dst.
func appendStream(dst, src []byte, w resettableWriter) ([]byte, error) {
	out := appender{b: dst}
	w.Reset(&out)
	if _, err := w.Write(src); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	w.Reset(nil) // do not keep out's buffer alive in the pool
	return out.b, nil
}

// appender is an io.Writer that appends to a slice.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Writers  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// Kafka's KafkaLZ4BlockOutputStream: 64 KiB independent blocks, no
		// content checksum.
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)); err != nil {
			panic(err) // constant options: cannot fail
		}
		return w
	}}
	// zstdEncoder is shared: EncodeAll is safe for concurrent use.
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true))
		if err != nil {
			panic(err) // constant options: cannot fail
		}
		return e
	})
)

// xerial's snappy-java stream, which Kafka's Java client writes.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16       // magic, version int32, compatible version int32
	xerialBlockSize  = 32 << 10 // snappy-java's default block size
)

// appendXerial appends src as a xerial stream: the header, then blocks of
// at most 32 KiB, each an int32 length and a raw snappy block.
func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // compatible version
	for len(src) > 0 {
		block := src[:min(len(src), xerialBlockSize)]
		src = src[len(block):]
		at := len(dst)
		dst = slices.Grow(dst, 4+s2.MaxEncodedLen(len(block)))
		enc := s2.EncodeSnappy(dst[at+4:cap(dst)], block)
		binary.BigEndian.PutUint32(dst[at:at+4], uint32(len(enc)))
		dst = dst[:at+4+len(enc)]
	}
	return dst
}

// AppendDecompressed appends src decompressed with c to dst. It fails with
// ErrTooLarge as soon as the output would pass limit bytes, so that memory
// is never spent past the limit, and with ErrCorruptCompression when the
// codec cannot decode src.
func AppendDecompressed(dst, src []byte, c Codec, limit int) ([]byte, error) {
	var err error
	switch c {
	case CodecNone:
		if len(src) > limit {
			return dst, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(src), limit)
		}
		return append(dst, src...), nil
	case CodecGzip:
		r := gzipReaders.Get().(*gzip.Reader)
		defer gzipReaders.Put(r)
		if err = r.Reset(bytes.NewReader(src)); err == nil {
			dst, err = readLimited(dst, r, limit, len(src))
		}
	case CodecSnappy:
		dst, err = appendSnappy(dst, src, limit)
	case CodecLZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		dst, err = readLimited(dst, r, limit, len(src))
	case CodecZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		if err = d.Reset(bytes.NewReader(src)); err == nil {
			dst, err = readLimited(dst, d, limit, len(src))
		}
	default:
		return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
	}
	switch {
	case err == nil:
		return dst, nil
	case errors.Is(err, ErrTooLarge):
		return dst, fmt.Errorf("%s: %w", c, err)
	}
	return dst, fmt.Errorf("%w: %s: %v", ErrCorruptCompression, c, err)
}

var (
	gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	// zstdDecoders decode synchronously (concurrency 1, no goroutines),
	// so a pooled decoder that is dropped leaks nothing. The window is
	// capped at 8 MiB, what the zstd format asks every decoder to support.
	zstdDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(8<<20))
		if err != nil {
			panic(err) // constant options: cannot fail
		}
		return d
	}}
)

// readLimited appends everything r yields to dst, failing with ErrTooLarge
// once more than limit bytes arrive. The buffer starts at a guess from the
// input size and grows by doubling, never past the limit.
func readLimited(dst []byte, r io.Reader, limit, inputSize int) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, min(max(4*inputSize, 4<<10), limit+1))
	for {
		if len(dst) == cap(dst) {
			// Double, but never past one byte over the limit: that byte
			// is how an oversized stream is caught.
			dst = slices.Grow(dst, min(max(cap(dst)-start, 4<<10), limit+1-(len(dst)-start)))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst[:start], fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
	}
}

// appendSnappy decodes a xerial stream or a raw snappy block. The decoded
// size of each block is in its first bytes, so the limit is checked before
// anything is decoded.
func appendSnappy(dst, src []byte, limit int) ([]byte, error) {
	start := len(dst)
	block := func(b []byte) error {
		n, err := s2.DecodedLen(b)
		if err != nil {
			return err
		}
		if len(dst)-start+n > limit {
			return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		at := len(dst)
		dst = slices.Grow(dst, n)[:at+n]
		_, err = s2.Decode(dst[at:], b)
		return err
	}
	if !bytes.HasPrefix(src, xerialMagic) {
		if err := block(src); err != nil {
			return dst[:start], err
		}
		return dst, nil
	}
	if len(src) < xerialHeaderSize {
		return dst[:start], fmt.Errorf("xerial header of %d bytes", len(src))
	}
	for rest := src[xerialHeaderSize:]; len(rest) > 0; {
		if len(rest) < 4 {
			return dst[:start], fmt.Errorf("xerial block length cut after %d bytes", len(rest))
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-4) {
			return dst[:start], fmt.Errorf("xerial block of %d bytes, %d left", n, len(rest)-4)
		}
		if err := block(rest[4 : 4+n]); err != nil {
			return dst[:start], err
		}
		rest = rest[4+n:]
	}
	return dst, nil
}
