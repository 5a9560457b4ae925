package engine

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"hubwire.dev/go/frame"
	"hubwire.dev/go/transport"
)

// A client whose provider sends a header announcing a body over max_frame
// and never stops writing body bytes (spec/PROTOCOL.md §7.3, over TCP):
// the provider still reads the GOAWAY too_large, then end of stream, and
// its writes fail soon after (the client discards input for a bounded
// time, then closes), while the application still holds the connection.
// Bounds are generous: the machine may be busy.
func TestAFatalGoawayCutsOffAPeerThatNeverStopsWriting(t *testing.T) {
	const bound = 5 * time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type seen struct {
		goaway               frame.Code
		readEnded, writeFail time.Duration
	}
	got := make(chan seen, 1)
	go func() {
		s, err := l.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		start := time.Now()
		hello := (&frame.Frame{Type: frame.TypeHello, Hello: frame.NewHello(frame.PeerInfo{Name: "raw", Lang: "test", Version: "0"})}).Append(nil)
		header := make([]byte, 12)
		binary.LittleEndian.PutUint32(header, frame.DefaultMaxFrame+1)
		copy(header[4:], []byte{1, 2, 0, 0})
		binary.LittleEndian.PutUint32(header[8:], 2)
		writeFail := make(chan time.Duration, 1)
		go func() {
			s.SetWriteDeadline(start.Add(bound))
			body := make([]byte, 64<<10)
			for _, b := range [][]byte{hello, header} {
				if _, err := s.Write(b); err != nil {
					writeFail <- -1
					return
				}
			}
			for {
				if _, err := s.Write(body); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						writeFail <- -1
					} else {
						writeFail <- time.Since(start)
					}
					return
				}
			}
		}()
		s.SetReadDeadline(start.Add(bound))
		dec := frame.NewDecoder(^uint32(0))
		var buf []byte
		chunk := make([]byte, 64<<10)
		r := seen{readEnded: -1}
		for r.readEnded < 0 {
			for {
				f, n, ferr := dec.Decode(buf)
				if ferr != nil || n == 0 {
					break
				}
				if f.Type == frame.TypeGoaway {
					r.goaway = f.Code
				}
				buf = buf[n:]
			}
			n, err := s.Read(chunk)
			buf = append(buf, chunk[:n]...)
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					r.readEnded = time.Since(start)
				}
				break
			}
		}
		r.writeFail = <-writeFail
		got <- r
	}()
	tr, err := transport.DialTCP(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(tr, Options{}, true)
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.goaway != frame.TooLarge {
		t.Errorf("got GOAWAY %v, want too_large", r.goaway)
	}
	if r.readEnded < 0 {
		t.Errorf("the peer's read did not end within %v", bound)
	}
	if r.writeFail < 0 {
		t.Errorf("the peer's writes did not fail within %v", bound)
	}
	c.Close() // the application held the connection until now
}
