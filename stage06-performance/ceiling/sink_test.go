package ceiling_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// sink is the thinnest server a Produce load can meet: per connection it
// reads each request whole, write(2)s it to that connection's file and
// answers with the request's correlation id. No parsing, no validation,
// no offsets, no index, no handler hand-off: TCP in, a file out. No
// broker on this machine can take more over TCP, so a broker's rate over
// the sink's is what its own work costs, and the sink's over raw is what
// TCP costs.
type sink struct {
	ln  net.Listener
	dir string
	wg  sync.WaitGroup
}

func startSink(b *testing.B) *sink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &sink{ln: ln, dir: b.TempDir()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for i := 0; ; i++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				// The load generator closes with a reset (loadgen.Load.Close).
				err := s.serve(nc, filepath.Join(s.dir, fmt.Sprintf("conn-%d.log", i)))
				if err != nil && err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
					b.Error(err)
				}
			}()
		}
	}()
	return s
}

func (s *sink) serve(nc net.Conn, path string) error {
	defer nc.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(nc, 256<<10)
	var frame []byte
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if cap(frame) < n {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		if _, err := io.ReadFull(r, frame); err != nil {
			return err
		}
		if _, err := f.Write(frame); err != nil {
			return err
		}
		var resp [8]byte // size 4, then the correlation id
		binary.BigEndian.PutUint32(resp[:], 4)
		copy(resp[4:], frame[4:8])
		if _, err := nc.Write(resp[:]); err != nil {
			return err
		}
	}
}

// Close stops the sink and removes its files (discarding their pages).
func (s *sink) Close() {
	s.ln.Close()
	s.wg.Wait()
	os.RemoveAll(s.dir)
}
