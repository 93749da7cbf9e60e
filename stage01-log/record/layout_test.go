package record

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Golden-byte comparisons that name the field. A byte-slice diff says where
// two encodings part, not what the bytes there mean. The helpers below lay
// the wanted bytes out as fields (the batch header at its ...Pos constants,
// then each record's varints and byte strings) and report the first
// differing byte by offset and by field, with the field's value on each
// side:
//
//	byte 11, batchLength (int32 at 8..11): got 0x00000053 (83), want 0x0000004f (79)
//
// then the other header fields that differ, the first difference in the
// records (a header field such as batchLength or crc is often only the
// consequence of it), whether got's crc matches got's own bytes, a length
// mismatch, and the bytes around the first difference, 16 to a row.

// layoutField is one field of an encoding: its bytes from..to-1.
type layoutField struct {
	name string
	// kind is how the bytes read: int8, int16, int32, int64, uint32 and
	// attributes (an int16) big-endian; varint and varlong zigzag; bytes, a
	// byte string; group, one byte of a varint; blob, bytes with no
	// further layout (compressed records, or records that do not parse).
	kind     string
	from, to int
	// fixed fields sit at the same offset whatever the bytes before them
	// hold, so they can be compared even when got is longer or shorter.
	fixed bool
	// origin is where a blob's section starts, to count its bytes from.
	origin int
}

// batchLayout lays out want as a batch: the header fields, then the records
// if they are not compressed and parse, else the records as one blob.
func batchLayout(want []byte) []layoutField {
	header := []struct {
		name, kind string
		from, to   int
	}{
		{"baseOffset", "int64", baseOffsetPos, lengthPos},
		{"batchLength", "int32", lengthPos, partitionLeaderEpochPos},
		{"partitionLeaderEpoch", "int32", partitionLeaderEpochPos, magicPos},
		{"magic", "int8", magicPos, crcPos},
		{"crc", "uint32", crcPos, attributesPos},
		{"attributes", "attributes", attributesPos, lastOffsetDeltaPos},
		{"lastOffsetDelta", "int32", lastOffsetDeltaPos, firstTimestampPos},
		{"firstTimestamp", "int64", firstTimestampPos, maxTimestampPos},
		{"maxTimestamp", "int64", maxTimestampPos, producerIDPos},
		{"producerId", "int64", producerIDPos, producerEpochPos},
		{"producerEpoch", "int16", producerEpochPos, baseSequencePos},
		{"baseSequence", "int32", baseSequencePos, recordsCountPos},
		{"recordsCount", "int32", recordsCountPos, HeaderSize},
	}
	fields := make([]layoutField, 0, len(header)+16)
	for _, h := range header {
		fields = append(fields, layoutField{name: h.name, kind: h.kind, from: h.from, to: h.to, fixed: true})
	}
	if len(want) <= HeaderSize {
		return fields
	}
	if c := Attributes(binary.BigEndian.Uint16(want[attributesPos:])).Codec(); c != CodecNone {
		return append(fields, layoutField{name: fmt.Sprintf("records (%s-compressed)", c), kind: "blob",
			from: HeaderSize, to: len(want), origin: HeaderSize})
	}
	return append(fields, recordsLayout(want[HeaderSize:], HeaderSize)...)
}

// recordsLayout lays out records encoded back to back, b[0] being byte base
// of the whole encoding. From the first record that does not parse on, the
// bytes are one blob.
func recordsLayout(b []byte, base int) []layoutField {
	p := &layoutParser{b: b, end: len(b), base: base}
	for i := 0; p.pos < len(b); i++ {
		start, n := p.pos, len(p.fields)
		if !p.record(fmt.Sprintf("record %d ", i)) {
			p.fields = append(p.fields[:n], layoutField{name: "records", kind: "blob",
				from: base + start, to: base + len(b), origin: base})
			break
		}
	}
	return p.fields
}

// layoutParser walks wanted records, noting each field it reads.
type layoutParser struct {
	b      []byte
	pos    int // next byte to read
	end    int // end of the current record's body, or len(b)
	base   int // offset of b[0] in the whole encoding
	fields []layoutField
}

func (p *layoutParser) add(name, kind string, n int) {
	p.fields = append(p.fields, layoutField{name: name, kind: kind, from: p.base + p.pos, to: p.base + p.pos + n})
	p.pos += n
}

func (p *layoutParser) varint(name, kind string) (int64, bool) {
	maxBytes := 5
	if kind == "varlong" {
		maxBytes = 10
	}
	v, n := readVarint(p.b[p.pos:p.end], maxBytes)
	if n == 0 {
		return 0, false
	}
	p.add(name, kind, n)
	return v, true
}

// nullable reads a length varint named name+"Length" and, unless it is -1
// (null) or 0, the bytes it counts, named name.
func (p *layoutParser) nullable(name string) bool {
	n, ok := p.varint(name+"Length", "varint")
	switch {
	case !ok || n < -1 || n > int64(p.end-p.pos):
		return false
	case n > 0:
		p.add(name, "bytes", int(n))
	}
	return true
}

func (p *layoutParser) record(prefix string) bool {
	length, ok := p.varint(prefix+"length", "varint")
	if !ok || length < 0 || length > int64(len(p.b)-p.pos) {
		return false
	}
	p.end = p.pos + int(length)
	defer func() { p.end = len(p.b) }()
	if p.pos == p.end {
		return false
	}
	p.add(prefix+"attributes", "int8", 1)
	if _, ok := p.varint(prefix+"timestampDelta", "varlong"); !ok {
		return false
	}
	if _, ok := p.varint(prefix+"offsetDelta", "varint"); !ok {
		return false
	}
	if !p.nullable(prefix+"key") || !p.nullable(prefix+"value") {
		return false
	}
	count, ok := p.varint(prefix+"headerCount", "varint")
	if !ok || count < 0 || count > int64(p.end-p.pos) {
		return false
	}
	for j := range int(count) {
		h := fmt.Sprintf("%sheader %d ", prefix, j)
		if !p.nullable(h+"key") || !p.nullable(h+"value") {
			return false
		}
	}
	return p.pos == p.end
}

// varintLayout lays out a varint byte by byte: each byte holds 7 bits of
// the zigzag value.
func varintLayout(want []byte) []layoutField {
	fields := make([]layoutField, len(want))
	for i := range want {
		fields[i] = layoutField{name: fmt.Sprintf("group %d of %d", i, len(want)), kind: "group", from: i, to: i + 1}
	}
	return fields
}

// fieldAt returns the field holding byte i.
func fieldAt(fields []layoutField, i int) layoutField {
	for _, f := range fields {
		if f.from <= i && i < f.to {
			return f
		}
	}
	return layoutField{name: "unlaid bytes", kind: "blob", from: i, to: i + 1, origin: i}
}

// span is "at 8..11", or "at 16" for one byte.
func (f layoutField) span() string {
	if f.to-f.from == 1 {
		return fmt.Sprintf("at %d", f.from)
	}
	return fmt.Sprintf("at %d..%d", f.from, f.to-1)
}

// describe names f, where the byte at is.
func (f layoutField) describe(at int) string {
	switch f.kind {
	case "bytes":
		if f.to-f.from == 1 {
			return fmt.Sprintf("%s (1 byte %s)", f.name, f.span())
		}
		return fmt.Sprintf("%s (%d bytes %s, byte %d of them)", f.name, f.to-f.from, f.span(), at-f.from)
	case "blob":
		return fmt.Sprintf("%s, byte %d of the records section", f.name, at-f.origin)
	case "group":
		return f.name + " (7 bits of the zigzag value each, the low group first)"
	}
	return fmt.Sprintf("%s (%s %s)", f.name, f.kind, f.span())
}

// value renders f as b holds it, for the byte at.
func (f layoutField) value(b []byte, at int) string {
	if f.from >= len(b) || at >= len(b) && (f.kind == "blob" || f.kind == "bytes") {
		return fmt.Sprintf("nothing (the bytes end at %d)", len(b))
	}
	switch f.kind {
	case "varint", "varlong":
		maxBytes := 5
		if f.kind == "varlong" {
			maxBytes = 10
		}
		v, n := readVarint(b[f.from:], maxBytes)
		if n == 0 {
			return fmt.Sprintf("0x%x… (no %s of at most %d bytes ends there)", b[f.from:min(len(b), f.from+maxBytes)], f.kind, maxBytes)
		}
		return fmt.Sprintf("0x%x (%d)", b[f.from:f.from+n], v)
	case "bytes":
		return quoteAround(b[f.from:min(len(b), f.to)], at-f.from)
	case "blob":
		return fmt.Sprintf("0x%02x", b[at])
	case "group":
		c, more := b[f.from], "clear: the last byte"
		if c&0x80 != 0 {
			more = "set: more bytes follow"
		}
		return fmt.Sprintf("0x%02x (group 0x%02x, 0x80 %s)", c, c&0x7f, more)
	}
	if len(b) < f.to {
		return fmt.Sprintf("0x%x (cut short: %d of %d bytes)", b[f.from:], len(b)-f.from, f.to-f.from)
	}
	raw, be := b[f.from:f.to], binary.BigEndian
	var v any
	switch f.kind {
	case "int8":
		v = int8(raw[0])
	case "int16":
		v = int16(be.Uint16(raw))
	case "int32":
		v = int32(be.Uint32(raw))
	case "uint32":
		v = be.Uint32(raw)
	case "int64":
		v = int64(be.Uint64(raw))
	case "attributes":
		a := Attributes(be.Uint16(raw))
		s := fmt.Sprintf("codec %s, %s", a.Codec(), a.TimestampType())
		if a.Transactional() {
			s += ", transactional"
		}
		if a.Control() {
			s += ", control"
		}
		v = s
	}
	return fmt.Sprintf("0x%x (%v)", raw, v)
}

// quoteAround quotes b, or 24 of its bytes around b[i] if it is long.
func quoteAround(b []byte, i int) string {
	if len(b) <= 32 {
		return fmt.Sprintf("%q", b)
	}
	lo := max(0, min(i-12, len(b)-24))
	hi := min(len(b), lo+24)
	s := fmt.Sprintf("%q", b[lo:hi])
	if lo > 0 {
		s = "…" + s
	}
	if hi < len(b) {
		s += "…"
	}
	return s
}

// firstDiff is the index of the first byte where got and want differ, or
// the length of the shorter if one is a prefix of the other.
func firstDiff(got, want []byte) int {
	n := min(len(got), len(want))
	for i := range n {
		if got[i] != want[i] {
			return i
		}
	}
	return n
}

func diffLine(f layoutField, got, want []byte, at int) string {
	return fmt.Sprintf("byte %d, %s: got %s, want %s", at, f.describe(at), f.value(got, at), f.value(want, at))
}

// describeDiff explains how got differs from want, laid out by fields: one
// line per finding, or nil if they are equal.
func describeDiff(got, want []byte, fields []layoutField) []string {
	if bytes.Equal(got, want) {
		return nil
	}
	common := min(len(got), len(want))
	first := firstDiff(got, want)
	var lines []string
	if first < common {
		f := fieldAt(fields, first)
		lines = append(lines, diffLine(f, got, want, first))
		// A header field that differs is often only the consequence of a
		// difference in the records: show the first of those too.
		later, laterAt := layoutField{}, -1
		if f.fixed {
			for i := first + 1; i < common; i++ {
				if g := fieldAt(fields, i); got[i] != want[i] && !g.fixed {
					later, laterAt = g, i
					break
				}
			}
		}
		// Other differing fields, where their offsets still mean the same
		// thing in got: fixed fields always, the others if nothing shifted.
		var also []string
		for _, g := range fields {
			switch {
			case g.from <= f.from || g.from >= common || (laterAt >= 0 && g.from == later.from),
				!g.fixed && len(got) != len(want),
				bytes.Equal(got[g.from:min(g.to, common)], want[g.from:min(g.to, common)]):
				continue
			}
			also = append(also, g.name)
		}
		if len(also) > 8 {
			also = append(also[:8], fmt.Sprintf("and %d more", len(also)-8))
		}
		if len(also) > 0 {
			lines = append(lines, "also different: "+strings.Join(also, ", "))
		}
		if laterAt >= 0 {
			lines = append(lines, "first difference past the header: "+diffLine(later, got, want, laterAt))
		}
	}
	if len(got) != len(want) {
		line := fmt.Sprintf("length: got %d bytes, want %d", len(got), len(want))
		switch {
		case first < common:
		case len(got) < len(want):
			f := fieldAt(fields, common)
			if f.from == common {
				line += fmt.Sprintf("; got ends where %s should start", f.describe(common))
			} else {
				line += fmt.Sprintf("; got ends inside %s", f.describe(common))
			}
		default:
			extra := got[common:]
			more := ""
			if len(extra) > 16 {
				extra, more = extra[:16], "…"
			}
			line += fmt.Sprintf("; got has %d bytes more, from byte %d: 0x%x%s", len(got)-common, common, extra, more)
		}
		lines = append(lines, line)
	}
	return lines
}

// hexRows shows got and want 16 bytes a row, a * marking the rows that
// differ; of a long encoding, only the rows around the first difference.
func hexRows(got, want []byte) string {
	first := firstDiff(got, want)
	rows := (max(len(got), len(want)) + 15) / 16
	lo, hi := 0, rows
	if rows > 8 {
		lo, hi = max(0, first/16-2), min(rows, first/16+3)
	}
	row := func(b []byte, i int) string {
		if i*16 >= len(b) {
			return ""
		}
		return hex.EncodeToString(b[i*16 : min(len(b), i*16+16)])
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%6s  %-32s  %s", "offset", "got", "want")
	if lo > 0 {
		s.WriteString("\n     …")
	}
	for i := lo; i < hi; i++ {
		g, w := row(got, i), row(want, i)
		mark := ""
		if g != w {
			mark = "  *"
		}
		s.WriteString(strings.TrimRight(fmt.Sprintf("\n%6d  %-32s  %-32s%s", i*16, g, w, mark), " "))
	}
	if hi < rows {
		s.WriteString("\n     …")
	}
	return s.String()
}

// diffBatch explains how got differs from want, a batch, or returns "".
func diffBatch(got, want []byte) string {
	if bytes.Equal(got, want) {
		return "" // and no layout: a passing test depends on no decoder
	}
	lines := describeDiff(got, want, batchLayout(want))
	if len(got) >= HeaderSize && len(want) >= HeaderSize && !bytes.Equal(got[crcPos:attributesPos], want[crcPos:attributesPos]) {
		stored, computed := binary.BigEndian.Uint32(got[crcPos:]), Checksum(got)
		if stored == computed {
			lines = append(lines, fmt.Sprintf("got's crc 0x%08x is the CRC-32C of its own bytes %d..%d: bytes the crc covers differ",
				stored, attributesPos, len(got)-1))
		} else {
			lines = append(lines, fmt.Sprintf("got's crc 0x%08x is not the CRC-32C of its own bytes %d..%d, 0x%08x: "+
				"were some of them written after the crc?", stored, attributesPos, len(got)-1, computed))
		}
	}
	return strings.Join(lines, "\n") + "\n" + hexRows(got, want)
}

// requireBatch fails t unless got is want, a batch, byte for byte; what
// says which encoding got is.
func requireBatch(t testing.TB, what string, want, got []byte) {
	t.Helper()
	if d := diffBatch(got, want); d != "" {
		t.Fatalf("%s differs from the wanted bytes:\n%s", what, d)
	}
}

// requireVarint fails t unless got is want, the encoding of v.
func requireVarint(t testing.TB, v int64, want, got []byte) {
	t.Helper()
	lines := describeDiff(got, want, varintLayout(want))
	if lines == nil {
		return
	}
	zigzag := uint64(v<<1) ^ uint64(v>>63)
	readBack := "does not read back as a varint"
	if r, n := readVarint(got, 10); n == len(got) {
		readBack = fmt.Sprintf("reads back as %d", r)
	}
	t.Fatalf("appendVarint(%d) = %x, want %x: the zigzag value of %d is %d (0x%x), written 7 bits a byte, "+
		"the low group first, 0x80 set on every byte but the last; got %s\n%s",
		v, got, want, v, zigzag, zigzag, readBack, strings.Join(lines, "\n"))
}

// goldenBytes is goldenHex decoded.
func goldenBytes(t testing.TB) []byte {
	t.Helper()
	b, err := hex.DecodeString(goldenHex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenDiffNamesTheField: a byte flipped anywhere in the golden batch
// is reported at its offset and in the field that holds it, header field or
// record field, with the field's value on both sides.
func TestGoldenDiffNamesTheField(t *testing.T) {
	golden := goldenBytes(t)
	require.Empty(t, diffBatch(golden, golden))
	fields := map[int]string{
		0: "baseOffset", 7: "baseOffset", 8: "batchLength", 11: "batchLength",
		12: "partitionLeaderEpoch", 16: "magic", 17: "crc", 20: "crc",
		21: "attributes", 22: "attributes", 23: "lastOffsetDelta", 27: "firstTimestamp",
		35: "maxTimestamp", 43: "producerId", 51: "producerEpoch", 53: "baseSequence",
		57: "recordsCount", 60: "recordsCount",
		61: "record 0 length", 62: "record 0 attributes", 63: "record 0 timestampDelta",
		64: "record 0 offsetDelta", 65: "record 0 keyLength", 67: "record 0 key",
		68: "record 0 valueLength", 69: "record 0 value", 73: "record 0 value",
		74: "record 0 headerCount", 75: "record 1 length", 79: "record 1 keyLength",
		80: "record 1 valueLength", 81: "record 1 value", 86: "record 1 headerCount",
		87: "record 1 header 0 keyLength", 88: "record 1 header 0 key",
		89: "record 1 header 0 valueLength", 90: "record 1 header 0 value",
	}
	for at, name := range fields {
		got := bytes.Clone(golden)
		got[at] ^= 0x01
		d := diffBatch(got, golden)
		require.True(t, strings.HasPrefix(d, fmt.Sprintf("byte %d, %s ", at, name)), "flipped byte %d:\n%s", at, d)
	}

	firstLine := func(d string) string { return strings.SplitN(d, "\n", 2)[0] }
	got := bytes.Clone(golden)
	got[lengthPos+3] += 4 // batchLength off by 4
	require.Equal(t, "byte 11, batchLength (int32 at 8..11): got 0x00000053 (83), want 0x0000004f (79)", firstLine(diffBatch(got, golden)))

	got = bytes.Clone(golden)
	got[71] = 'x' // "hello" becomes "hexlo"
	require.Equal(t, `byte 71, record 0 value (5 bytes at 69..73, byte 2 of them): got "hexlo", want "hello"`, firstLine(diffBatch(got, golden)))

	got = bytes.Clone(golden)
	got[80] = 0x0c // record 1's value counted 6 bytes long
	require.Equal(t, "byte 80, record 1 valueLength (varint at 80): got 0x0c (6), want 0x0a (5)", firstLine(diffBatch(got, golden)))

	got = bytes.Clone(golden)
	got[attributesPos+1] = 0x18
	require.Equal(t, "byte 22, attributes (attributes at 21..22): got 0x0018 (codec none, LogAppendTime, transactional), "+
		"want 0x0000 (codec none, CreateTime)", firstLine(diffBatch(got, golden)))

	// A header field that differs because a record does: both are named,
	// and the crc is found to match got's own bytes.
	got = bytes.Clone(golden)
	got[71] = 'x'
	binary.BigEndian.PutUint32(got[crcPos:], Checksum(got))
	d := diffBatch(got, golden)
	require.Contains(t, d, "byte 17, crc (uint32 at 17..20): got 0x")
	require.Contains(t, d, `first difference past the header: byte 71, record 0 value`)
	require.Contains(t, d, "got's crc 0x")
	require.Contains(t, d, "is the CRC-32C of its own bytes 21..90")

	// A stale crc is told apart from a right one.
	got = bytes.Clone(golden)
	got[crcPos] ^= 0xff
	require.Contains(t, diffBatch(got, golden), "is not the CRC-32C of its own bytes 21..90, 0xd7504ea8")

	// Other differing header fields are listed.
	got = bytes.Clone(golden)
	got[magicPos], got[producerEpochPos] = 1, 0
	require.Contains(t, diffBatch(got, golden), "\nalso different: producerEpoch\n")
}

// TestGoldenDiffReportsLengthsAndOpaqueRecords: a batch cut short or
// extended says where; bytes past the header that are not records the
// layout can read (compressed, or malformed) are counted in the records
// section; a varint is explained group by group.
func TestGoldenDiffReportsLengthsAndOpaqueRecords(t *testing.T) {
	golden := goldenBytes(t)
	require.Contains(t, diffBatch(golden[:80], golden),
		"length: got 80 bytes, want 91; got ends where record 1 valueLength (varint at 80) should start")
	require.Contains(t, diffBatch(golden[:71], golden),
		"length: got 71 bytes, want 91; got ends inside record 0 value (5 bytes at 69..73, byte 2 of them)")
	require.Contains(t, diffBatch(append(bytes.Clone(golden), 0xaa, 0xbb), golden),
		"length: got 93 bytes, want 91; got has 2 bytes more, from byte 91: 0xaabb")
	require.Contains(t, diffBatch(golden[:10], golden),
		"length: got 10 bytes, want 91; got ends inside batchLength (int32 at 8..11)")

	zstd := compressedBatch(t, CodecZstd, 20)
	got := bytes.Clone(zstd)
	got[HeaderSize+9] ^= 0x01
	require.True(t, strings.HasPrefix(diffBatch(got, zstd), "byte 70, records (zstd-compressed), byte 9 of the records section: got 0x"))

	malformed := bytes.Clone(golden)
	malformed[HeaderSize] = 0x7e // record 0 claims 63 bytes
	got = bytes.Clone(malformed)
	got[HeaderSize+4] ^= 0x01
	require.True(t, strings.HasPrefix(diffBatch(got, malformed), "byte 65, records, byte 4 of the records section: got 0x05, want 0x04"))

	// Records without a batch header.
	records := golden[HeaderSize:]
	got = bytes.Clone(records)
	got[27] ^= 0x01
	lines := describeDiff(got, records, recordsLayout(records, 0))
	require.True(t, strings.HasPrefix(lines[0], "byte 27, record 1 header 0 key (1 byte at 27): "), lines[0])

	lines = describeDiff([]byte{0xac, 0x02}, []byte{0xd8, 0x04}, varintLayout([]byte{0xd8, 0x04}))
	require.Equal(t, []string{
		"byte 0, group 0 of 2 (7 bits of the zigzag value each, the low group first): " +
			"got 0xac (group 0x2c, 0x80 set: more bytes follow), want 0xd8 (group 0x58, 0x80 set: more bytes follow)",
		"also different: group 1 of 2",
	}, lines)
}

// TestGoldenDiffNeverPanics: whatever got holds, the helpers explain the
// difference without panicking, on a plain and a compressed batch.
func TestGoldenDiffNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, want := range [][]byte{goldenBytes(t), compressedBatch(t, CodecLZ4, 5), goldenBytes(t)[:30], nil} {
		for range 2000 {
			got := bytes.Clone(want)
			switch rng.IntN(3) {
			case 0:
				got = got[:rng.IntN(len(got)+1)]
			case 1:
				for range 1 + rng.IntN(8) {
					got = append(got, byte(rng.Uint32()))
				}
			}
			for range rng.IntN(4) {
				if len(got) > 0 {
					got[rng.IntN(len(got))] = byte(rng.Uint32())
				}
			}
			d := diffBatch(got, want)
			require.Equal(t, bytes.Equal(got, want), d == "", "got %x, want %x:\n%s", got, want, d)
			_ = describeDiff(got, want, varintLayout(want))
		}
	}
}
