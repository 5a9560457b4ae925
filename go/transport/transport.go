// Package transport moves bytes between two hubwire peers and does nothing
// else: no frames, no calls. Every transport implements one small
// interface, Transport; the engine reads, writes and closes through it.
//
//   - memory.go: a connected pair in memory (tests, one process), with
//     socket semantics: a bounded buffer each way, end of stream on close.
//   - conn.go: any stream socket (Unix, TCP, a socketpair) through its
//     descriptor, so reads and writes can also be tried without blocking.
//   - unix.go, tcp.go: listening and dialling.
//   - child.go: a provider in a child process on a socketpair at descriptor
//     3 (spec/PROTOCOL.md §10); its stdout and stderr become log lines.
package transport

import "errors"

// ErrWouldBlock is returned by TryRead and TryWrite when nothing can be
// read or written without waiting.
var ErrWouldBlock = errors.New("hubwire/transport: operation would block")

// Transport is one reliable, ordered, bidirectional byte stream.
//
// Read, Write and Close may be called from different goroutines at once;
// reads come from one goroutine at a time, writes likewise.
type Transport interface {
	// Read reads at least one byte into p, waiting for it; io.EOF at the
	// end of the stream.
	Read(p []byte) (int, error)
	// TryRead is Read without waiting: ErrWouldBlock if no byte is there.
	// The low-latency wait mode spins on it.
	TryRead(p []byte) (int, error)
	// TryWrite writes as much of bufs, in order, as fits now (one vectored
	// write where the transport has it) and returns how many bytes;
	// ErrWouldBlock if none fit.
	TryWrite(bufs [][]byte) (int, error)
	// Write writes all of bufs, waiting for room as needed.
	Write(bufs [][]byte) (int, error)
	// CloseWrite ends our direction: the peer reads end of stream after
	// the bytes already written.
	CloseWrite() error
	// Close ends both directions at once; a Read in progress returns.
	Close() error
	// String describes the other end for logs ("unix:/tmp/p.sock", "child:dice[123]").
	String() string
}

// Listener accepts transports: a Unix or TCP listening socket.
type Listener interface {
	// Accept waits for the next connection.
	Accept() (Transport, error)
	// Close stops listening; a waiting Accept returns an error.
	Close() error
	// Addr is the address listened on: a path, or host:port.
	Addr() string
}

// total is the byte count of bufs.
func total(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// advance drops the first n bytes of bufs.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if n > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}
