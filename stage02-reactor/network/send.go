package network

import "os"

// A Send is one piece of a response: either bytes or a region of a file (a
// log segment). A Fetch response can so point at the log instead of copying
// the records into memory; stage 06 then writes the region with sendfile(2),
// which Kafka does with FileChannel.transferTo (§2.1.5 zero-copy).
type Send struct {
	// Bytes is written as it is when File is nil.
	Bytes []byte

	// File, if not nil, makes this Send the file region [Pos, Pos+Len).
	// The file must stay open until the response is written.
	File *os.File

	// Pos and Len locate the region in File.
	Pos, Len int64
}

// BytesSend returns a Send that writes b.
func BytesSend(b []byte) Send { return Send{Bytes: b} }

// FileSend returns a Send that writes n bytes of f starting at offset pos.
func FileSend(f *os.File, pos, n int64) Send { return Send{File: f, Pos: pos, Len: n} }

// size is the number of bytes the Send puts on the wire.
func (s *Send) size() int64 {
	if s.File != nil {
		return s.Len
	}
	return int64(len(s.Bytes))
}

// RegionSender writes file regions to non-blocking sockets. It is the seam
// through which stage 06 swaps the default copying sender for sendfile(2)
// zero-copy: a sendfile RegionSender is one method around unix.Sendfile,
// set in Config.RegionSender.
//
// The reactor's Processor keeps the progress of every region it writes, so a
// RegionSender holds no per-connection state: when the socket's send buffer
// fills up, SendRegion returns what it wrote, the Processor waits for EPOLLOUT
// and calls SendRegion again with the rest of the region (partial writes and
// resumption).
type RegionSender interface {
	// SendRegion writes up to n bytes of f, starting at offset pos, to the
	// non-blocking socket sock, and returns how many bytes reached the
	// socket.
	//
	// written < n with a nil error means the socket would block (EAGAIN):
	// the caller waits until the socket is writable and calls again with
	// pos+written and n-written. A RegionSender must write at least one byte
	// when the socket is writable, and must retry EINTR itself. Any error
	// closes the connection.
	//
	// SendRegion is called from a Processor's goroutine, so it must not
	// block (other than reading the file) and it must not keep f or sock
	// after it returns. Several Processors call it at the same time.
	SendRegion(sock int, f *os.File, pos, n int64) (written int64, err error)
}
