package engine

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"hubwire.dev/go/transport"
)

// The write path of a connection: frames from many goroutines, few
// system calls.
//
// Senders append encoded frames to one queue under a short lock. The
// first sender to find nobody flushing becomes the flusher and writes the
// queue itself, on its own goroutine, with one non-blocking writev;
// senders that append meanwhile leave their frames for it. There is no
// goroutine hop on the fast path. When the socket is full, the rest goes
// to the background flusher, a goroutine that waits for room — so a
// sender, and above all the reader, never blocks on a full socket (two
// readers each blocked writing to the other would deadlock).
//
// Small frames are copied into one contiguous buffer; payloads above
// copyLimit stay separate segments (no copy; the sender must not change
// them until written).
//
// Two exceptions to flushing at once, both so that frames that come in a
// burst leave in one write (one writev, one wake-up of the peer):
//   - while the reader dispatches the frames of one read, the writer is
//     corked: frames the reader produces meanwhile (CREDIT, PONG, refusals)
//     are written together at uncork;
//   - a frame sent while other calls are in flight (pipelining: more are
//     coming) is pushed "soon": the background flusher writes it after
//     yielding once, so frames of goroutines already runnable join it.
//
// Bounds: above its cap (Options.WriteQueue, 4 MiB) queued bytes, stream
// senders wait (ready) for the queue to drain and the reader holds the
// peer's new calls and PINGs (reader.go), so a peer that does not read is
// held back by its own full socket; answers to calls already running
// still queue, bounded by the calls the peer may have in flight.
type writer struct {
	t transport.Transport

	mu       sync.Mutex
	head     []byte   // small frames, not yet sealed into segs
	segs     [][]byte // sealed runs of frames and large payloads, in order
	spare    []byte   // a written head buffer, reused
	queued   int
	flushing bool // a flusher owns the queue (inline or background)
	bg       bool // ... and it is the background flusher (a stale kick must not make it take over)
	corked   bool
	closed   error
	drained  chan struct{} // closed and replaced when the queue empties or drops to its cap
	waiting  int           // goroutines waiting on drained (only then is it replaced: no allocation per flush)

	inline [][]byte // the inline flusher's batch, reused (one flusher at a time)

	kick chan struct{} // wakes the background flusher; one token
	soon bool          // the kick was for a pipelined frame: yield before writing

	cap int // queued bytes above which senders wait and the reader holds new calls
	// high: more than cap is queued (and the writer is open), kept beside
	// the lock so the check per REQUEST read (overCap) takes none.
	// Written under mu whenever queued or closed changes.
	high atomic.Bool
}

const (
	copyLimit = 4096
	maxBatch  = 64 // segments per writev
)

var errWriterClosed = errors.New("connection closed")

func newWriter(t transport.Transport, cap int) *writer {
	w := &writer{t: t, cap: cap, head: make([]byte, 0, 16<<10), drained: make(chan struct{}), kick: make(chan struct{}, 1)}
	go w.background()
	return w
}

// push queues a frame: head (copied) then payload. It flushes inline
// unless another goroutine is flushing, the writer is corked, or soon is
// set. It fails only when the connection is closed.
func (w *writer) push(head, payload []byte, soon bool) error {
	w.mu.Lock()
	if w.closed != nil {
		err := w.closed
		w.mu.Unlock()
		return err
	}
	w.head = append(w.head, head...)
	if len(payload) <= copyLimit {
		w.head = append(w.head, payload...)
	} else {
		w.seal()
		w.segs = append(w.segs, payload)
	}
	w.queued += len(head) + len(payload)
	w.mark()
	if w.flushing || w.corked {
		w.mu.Unlock()
		return nil
	}
	w.flushing = true
	if soon {
		w.soon, w.bg = true, true
		w.mu.Unlock()
		w.wake()
		return nil
	}
	w.mu.Unlock()
	w.flushInline()
	return nil
}

func (w *writer) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// seal moves the small-frame buffer into the segment list.
func (w *writer) seal() {
	if len(w.head) == 0 {
		return
	}
	w.segs = append(w.segs, w.head)
	if w.spare != nil {
		w.head, w.spare = w.spare[:0], nil
	} else {
		w.head = make([]byte, 0, 16<<10)
	}
}

// cork holds inline flushes back until uncork.
func (w *writer) cork() {
	w.mu.Lock()
	w.corked = true
	w.mu.Unlock()
}

// uncork ends cork: writes what was queued meanwhile.
func (w *writer) uncork() {
	w.mu.Lock()
	w.corked = false
	if w.flushing || w.queued == 0 || w.closed != nil {
		w.mu.Unlock()
		return
	}
	w.flushing = true
	w.mu.Unlock()
	w.flushInline()
}

// take seals the queue and takes up to maxBatch segments into batch; on an
// empty queue it ends the flusher's turn and returns false.
// inline says the caller is the inline flusher, whose batch array goes
// back to the writer (cleared) with its turn, under the lock: the next
// inline flusher may take it the moment the turn ends.
func (w *writer) take(batch [][]byte, inline bool) ([][]byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seal()
	if len(w.segs) == 0 || w.closed != nil {
		w.flushing, w.bg = false, false
		w.queued = 0
		w.mark()
		w.broadcast()
		if inline {
			clear(batch[:cap(batch)])
			w.inline = batch[:0]
		}
		return batch, false
	}
	n := min(len(w.segs), maxBatch)
	batch = append(batch, w.segs[:n]...)
	// Shift the rest to the front, keeping the array: no allocation per flush.
	left := copy(w.segs, w.segs[n:])
	clear(w.segs[left:])
	w.segs = w.segs[:left]
	return batch, true
}

// done records n bytes written and recycles a fully written head buffer.
func (w *writer) done(n int, written [][]byte) {
	w.mu.Lock()
	before := w.queued
	w.queued = max(w.queued-n, 0)
	w.mark()
	if w.spare == nil {
		for _, b := range written {
			if cap(b) >= 16<<10 && cap(b) <= 1<<20 {
				w.spare = b[:0]
				break
			}
		}
	}
	if before > w.cap && w.queued <= w.cap {
		w.broadcast()
	}
	w.mu.Unlock()
}

// putBack returns an unwritten remainder to the front of the queue.
// The background flusher owns the queue from here on.
func (w *writer) putBack(batch [][]byte) {
	w.mu.Lock()
	w.segs = append(append(make([][]byte, 0, len(batch)+len(w.segs)), batch...), w.segs...)
	w.bg = true
	w.mu.Unlock()
}

// (putBack allocates: it runs only when the socket is full.)

func (w *writer) broadcast() {
	if w.waiting > 0 {
		close(w.drained)
		w.drained = make(chan struct{})
		w.waiting = 0
	}
}

// flushInline writes the queue with non-blocking writes until it is empty
// or the socket is full (then the background flusher takes over).
func (w *writer) flushInline() {
	w.mu.Lock()
	batch := w.inline // ours for this turn
	w.inline = nil
	w.mu.Unlock()
	for {
		var ok bool
		batch, ok = w.take(batch[:0], true)
		if !ok {
			return
		}
		whole := len(batch)
		n, err := w.t.TryWrite(batch)
		if err != nil && err != transport.ErrWouldBlock {
			w.close("write failed: " + err.Error())
			return
		}
		rest := advance(batch, n)
		w.done(n, batch[:whole-len(rest)])
		if len(rest) > 0 {
			w.putBack(rest) // the background flusher's turn now; this batch array is dropped
			w.wake()
			return
		}
	}
}

// background is the flusher of last resort: it writes what inline flushes
// could not (a full socket) and frames pushed soon, waiting for room.
func (w *writer) background() {
	var batch [][]byte
	for {
		<-w.kick
		w.mu.Lock()
		closed, soon, mine := w.closed != nil, w.soon, w.bg
		w.soon = false
		w.mu.Unlock()
		if closed {
			return
		}
		if !mine {
			continue // a stale kick: an inline flusher owns the queue, or nobody
		}
		if soon {
			// Let goroutines already runnable (callers, handlers) add
			// their frames to this write.
			runtime.Gosched()
		}
		for {
			var ok bool
			batch, ok = w.take(batch[:0], false)
			if !ok {
				break
			}
			for len(batch) > 0 {
				whole := batch
				n, err := w.t.Write(batch)
				if err != nil {
					w.close("write failed: " + err.Error())
					return
				}
				batch = advance(batch, n)
				w.done(n, whole[:len(whole)-len(batch)])
			}
		}
	}
}

// advance drops the first n bytes of bufs (fully written segments go,
// a partly written one is cut).
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

// mark updates high after queued or closed changed (with mu held).
func (w *writer) mark() {
	w.high.Store(w.queued > w.cap && w.closed == nil)
}

// overCap reports whether more than the cap is queued (and the writer is open).
func (w *writer) overCap() bool { return w.high.Load() }

// ready waits while more than the cap is queued, or until ctx ends:
// backpressure for stream senders, and for the reader.
func (w *writer) ready(ctx context.Context) {
	for {
		w.mu.Lock()
		if w.queued <= w.cap || w.closed != nil {
			w.mu.Unlock()
			return
		}
		ch := w.drained
		w.waiting++
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// flushed waits up to d until everything queued has been written.
func (w *writer) flushed(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		w.mu.Lock()
		if (w.queued == 0 && !w.flushing) || w.closed != nil {
			w.mu.Unlock()
			return
		}
		ch := w.drained
		w.waiting++
		w.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}

// close refuses further frames and drops what is queued.
func (w *writer) close(reason string) {
	w.mu.Lock()
	if w.closed == nil {
		w.closed = errors.New(reason)
	}
	w.segs, w.head = nil, nil
	w.queued = 0
	w.mark()
	w.broadcast()
	w.mu.Unlock()
	w.wake() // the background flusher sees closed and exits
}
