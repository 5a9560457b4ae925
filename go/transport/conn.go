//go:build unix

package transport

import (
	"errors"
	"io"
	"net"
	"syscall"
	"unsafe"
)

// maxIOV bounds the segments of one writev (Linux allows 1024).
const maxIOV = 64

// Conn is a Transport over a stream socket: a Unix socket, a TCP
// connection, or a socketpair to a child. Blocking reads go through the
// net package (the runtime's poller); TryRead and TryWrite call read and
// writev on the descriptor directly, which the socket, being non-blocking,
// answers at once.
type Conn struct {
	c    net.Conn
	raw  syscall.RawConn
	desc string
	iov  [maxIOV]syscall.Iovec // TryWrite's, reused (writes come from one goroutine at a time)

	// The calls in progress of TryRead and TryWrite, so that the
	// callbacks handed to RawConn are made once, not per call (a closure
	// per call would cost an allocation each).
	rp      []byte
	rn      int
	rerr    error
	readFn  func(fd uintptr) bool
	wbufs   [][]byte
	wn      int
	werr    syscall.Errno
	writeFn func(fd uintptr) bool
}

// NewConn wraps a stream socket. desc names the other end for logs.
func NewConn(c net.Conn, desc string) (*Conn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("hubwire/transport: not a socket with a descriptor")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	t := &Conn{c: c, raw: raw, desc: desc}
	t.readFn = func(fd uintptr) bool {
		for {
			t.rn, t.rerr = syscall.Read(int(fd), t.rp)
			if t.rerr != syscall.EINTR {
				return true
			}
		}
	}
	t.writeFn = func(fd uintptr) bool {
		t.wn, t.werr = t.writev(fd, t.wbufs)
		return true
	}
	return t, nil
}

// Read reads at least one byte, waiting in the runtime's poller.
func (t *Conn) Read(p []byte) (int, error) {
	n, err := t.c.Read(p)
	if n > 0 {
		return n, nil
	}
	return n, err
}

// TryRead reads what is there without waiting.
func (t *Conn) TryRead(p []byte) (int, error) {
	t.rp = p
	err := t.raw.Read(t.readFn)
	n, errno := t.rn, t.rerr
	t.rp = nil
	switch {
	case err != nil:
		return 0, err
	case errno == syscall.EAGAIN:
		return 0, ErrWouldBlock
	case errno != nil:
		return 0, errno
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// writev writes bufs with one system call; n < 0 never escapes.
func (t *Conn) writev(fd uintptr, bufs [][]byte) (int, syscall.Errno) {
	iov := t.iov[:0]
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		if len(iov) == maxIOV {
			break
		}
		v := syscall.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		iov = append(iov, v)
	}
	if len(iov) == 0 {
		return 0, 0
	}
	for {
		n, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// TryWrite writes what fits now, with one writev.
func (t *Conn) TryWrite(bufs [][]byte) (int, error) {
	t.wbufs = bufs
	err := t.raw.Write(t.writeFn)
	n, errno := t.wn, t.werr
	t.wbufs = nil
	switch {
	case err != nil:
		return 0, err
	case errno == syscall.EAGAIN:
		return 0, ErrWouldBlock
	case errno != 0:
		return 0, errno
	}
	return n, nil
}

// Write writes all of bufs, waiting in the poller while the socket is full.
func (t *Conn) Write(bufs [][]byte) (int, error) {
	want := total(bufs)
	bufs = append([][]byte(nil), bufs...)
	done := 0
	var errno syscall.Errno
	err := t.raw.Write(func(fd uintptr) bool {
		for done < want {
			n, e := t.writev(fd, bufs)
			if e == syscall.EAGAIN {
				return false // wait until writable, then again
			}
			if e != 0 {
				errno = e
				return true
			}
			done += n
			bufs = advance(bufs, n)
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	return done, err
}

// CloseWrite shuts down our direction of the socket.
func (t *Conn) CloseWrite() error {
	if cw, ok := t.c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the socket; a Read in progress returns an error.
func (t *Conn) Close() error { return t.c.Close() }

// String names the other end.
func (t *Conn) String() string { return t.desc }
