package transport

import (
	"errors"
	"io"
	"net"
	"sync"
)

// MemoryBuffer is how many bytes each direction of a memory pair holds
// before a writer waits (TryWrite writes only what fits).
const MemoryBuffer = 256 << 10

// pipe is one direction of a memory pair: a bounded byte queue.
type pipe struct {
	mu       sync.Mutex
	cond     sync.Cond // readers wait for bytes, writers for room
	buf      []byte
	eof      bool // the writer closed its side: end of stream after buf
	closed   bool // the reader closed its side: writes fail
	capacity int
}

func newPipe() *pipe {
	p := &pipe{capacity: MemoryBuffer}
	p.cond.L = &p.mu
	return p
}

func (p *pipe) read(dst []byte, wait bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 {
		switch {
		case p.closed:
			return 0, net.ErrClosed
		case p.eof:
			return 0, io.EOF
		case !wait:
			return 0, ErrWouldBlock
		}
		p.cond.Wait()
	}
	n := copy(dst, p.buf)
	p.buf = p.buf[n:]
	if len(p.buf) == 0 {
		p.buf = p.buf[:0:0] // let the backing array go
	}
	p.cond.Broadcast()
	return n, nil
}

func (p *pipe) write(bufs [][]byte, wait bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := 0
	for _, b := range bufs {
		for len(b) > 0 {
			if p.closed || p.eof {
				return done, errors.New("hubwire/transport: write on a closed memory transport: broken pipe")
			}
			room := p.capacity - len(p.buf)
			if room == 0 {
				if !wait {
					if done == 0 {
						return 0, ErrWouldBlock
					}
					return done, nil
				}
				p.cond.Wait()
				continue
			}
			n := min(room, len(b))
			p.buf = append(p.buf, b[:n]...)
			b = b[n:]
			done += n
			p.cond.Broadcast()
		}
	}
	return done, nil
}

// Memory is one end of an in-memory connection: the twin of a socket for
// tests and for peers in one process.
type Memory struct {
	in, out *pipe
	name    string
	once    sync.Once
}

// Pair returns the two ends of a new in-memory connection: what one
// writes, the other reads.
func Pair() (*Memory, *Memory) {
	a, b := newPipe(), newPipe()
	return &Memory{in: a, out: b, name: "memory:a"}, &Memory{in: b, out: a, name: "memory:b"}
}

// Read waits for at least one byte.
func (m *Memory) Read(p []byte) (int, error) { return m.in.read(p, true) }

// TryRead reads what is there.
func (m *Memory) TryRead(p []byte) (int, error) { return m.in.read(p, false) }

// TryWrite writes what fits in the buffer.
func (m *Memory) TryWrite(bufs [][]byte) (int, error) { return m.out.write(bufs, false) }

// Write writes everything, waiting for room.
func (m *Memory) Write(bufs [][]byte) (int, error) { return m.out.write(bufs, true) }

// CloseWrite ends our direction: the peer reads end of stream.
func (m *Memory) CloseWrite() error {
	m.out.mu.Lock()
	m.out.eof = true
	m.out.cond.Broadcast()
	m.out.mu.Unlock()
	return nil
}

// Close ends both directions: the peer reads end of stream, our own reads
// and writes fail.
func (m *Memory) Close() error {
	m.once.Do(func() {
		m.CloseWrite()
		m.in.mu.Lock()
		m.in.closed = true
		m.in.cond.Broadcast()
		m.in.mu.Unlock()
	})
	return nil
}

// String names the end: "memory:a" (the first of the pair) or "memory:b".
func (m *Memory) String() string { return m.name }
