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
// burst leave in few writes (one writev, one wake-up of the peer per
// batch) rather than one each:
//   - while the reader dispatches the frames of one read, the writer is
//     corked: frames the reader produces meanwhile (answers of handlers run
//     inline, CREDIT, PONG, refusals) are written together at uncork;
//   - a frame sent while other calls are in flight (pipelining: more are
//     coming) is pushed "soon": the flush is handed to the background
//     flusher, which writes after yielding once, so frames of goroutines
//     already runnable join it.
//
// Either way a batch is written once it holds batchFrames frames, without
// waiting for the rest of the burst: the peer starts on the first frames
// while this side makes the next ones. Writing a whole burst at once made
// the two processes take turns, each idle while the other worked (as in
// the Rust runtime: its writer.rs, and bench/README.md round 8). With
// more calls in flight a batch grows to half of them, up to batchMax
// (setBatch: the client counts its calls in flight as it starts one, the
// provider the REQUESTs of one read): two batches per burst still overlap
// the peer's work with ours, and a writev and the peer's wake-up are paid
// once per 64 frames rather than per 16 (the Rust runtime's rule,
// bench/README.md round 10). In Go, 128 calls in flight on a Unix socket,
// ten alternating turns: low-latency 984 → 951 ns and 1.77 → 1.69 µs CPU
// per call (medians), efficient unchanged within the noise
// (go/bench/README.md, Notes). A corked
// writer then flushes inline; a sender that fills a batch handed to the
// background flusher, which has not begun it, takes the flush back and
// writes inline. The background flusher writes only while it holds the
// hand-over (handed, taken under the lock when it begins): a kick left
// over from a hand-over taken back is ignored, so two flushers never write
// at once.
//
// Bounds: above its cap (Options.WriteQueue, 4 MiB) queued bytes, stream
// senders wait (ready) for the queue to drain and the reader holds the
// peer's new calls and PINGs (reader.go), so a peer that does not read is
// held back by its own full socket; answers to calls already running
// still queue, bounded by max_calls: a served call holds its slot until
// its RESPONSE is queued (pushFreeing). Calls in goroutines answer after
// the reader has moved on, so that is all calls taken and not yet
// answered when the queue went over its cap, not one.
type writer struct {
	t transport.Transport

	mu       sync.Mutex
	head     []byte   // small frames, not yet sealed into segs
	segs     [][]byte // sealed runs of frames and large payloads, in order
	spare    []byte   // a written head buffer, reused
	queued   int
	frames   int  // frames queued since the last batch was taken
	flushing bool // a flusher owns the queue (inline or background)
	// handed: the flush (flushing set) is handed to the background
	// flusher, which has not begun it yet. Set by whoever hands it over,
	// cleared by the background flusher as it begins, or by a sender that
	// takes a soon hand-over back (a kick left over is then ignored).
	handed  handoff
	corked  bool
	closed  error
	drained chan struct{} // closed and replaced when the queue empties or drops to its cap
	waiting int           // goroutines waiting on drained (only then is it replaced: no allocation per flush)

	inline [][]byte // the inline flusher's batch, reused (one flusher at a time)

	kick chan struct{} // wakes the background flusher; one token

	cap int // queued bytes above which senders wait and the reader holds new calls
	// high: more than cap is queued (and the writer is open), kept beside
	// the lock so the check per REQUEST read (overCap) takes none.
	// Written under mu whenever queued or closed changes.
	high atomic.Bool
	// batch: frames at which a held-back batch is written, batchFrames to
	// batchMax (setBatch). Atomic rather than under mu: every pipelined
	// call sets it (Core.begin), and taking mu for that would be a second
	// lock per call, contended by the flusher; push needs only a recent
	// value (a stale one sizes one batch as the one before, nothing worse).
	batch atomic.Int32
}

const (
	copyLimit = 4096
	maxBatch  = 64 // segments per writev
	// batchFrames: frames in a batch held back by a cork or handed to the
	// background flusher at which it is written at once (see the top of
	// this file), unless more calls are in flight (setBatch): small enough
	// that the peer starts early instead of waiting for the whole burst,
	// large enough that one writev of 16 small frames costs less than
	// making them. The Rust writer's BATCH_FRAMES.
	batchFrames = 16
	// batchMax: the largest batch setBatch sets (the Rust writer's
	// BATCH_MAX).
	batchMax = 64
)

// handoff says whether, and why, the flush is handed to the background
// flusher.
type handoff uint8

const (
	handNone handoff = iota
	// handSoon: by a frame pushed soon; the background flusher yields once
	// before it begins, and a sender that fills the batch meanwhile takes
	// the flush back.
	handSoon
	// handStalled: the socket was full; the background flusher waits for room.
	handStalled
)

var errWriterClosed = errors.New("connection closed")

func newWriter(t transport.Transport, cap int) *writer {
	w := newWriterAlone(t, cap)
	go w.background()
	return w
}

// newWriterAlone is newWriter without its background flusher (tests start
// it when they choose).
func newWriterAlone(t transport.Transport, cap int) *writer {
	w := &writer{t: t, cap: cap, head: make([]byte, 0, 16<<10), drained: make(chan struct{}), kick: make(chan struct{}, 1)}
	w.batch.Store(batchFrames)
	return w
}

// setBatch sizes the batches for inFlight calls: half of them, between
// batchFrames and batchMax frames (0: the smallest). Half, so that a
// burst of inFlight frames still leaves in two batches or more, the peer
// working on the first while this side makes the next; up to 64, so that
// the writev and the peer's wake-up are paid once per 64 small frames
// rather than per 16 when many calls are pipelined (Core.begin, and the
// reader per read: Core.readLoop).
func (w *writer) setBatch(inFlight int) {
	n := int32(min(max(inFlight/2, batchFrames), batchMax))
	// Stored only when it changes: called on every pipelined call, and a
	// store (a locked exchange on amd64) would take the cache line from
	// the flushers' loads each time, as in the Rust writer.
	if w.batch.Load() != n {
		w.batch.Store(n)
	}
}

// push queues a frame: head (copied) then payload. It flushes inline
// unless another goroutine is flushing, the writer is corked, or soon is
// set (then the background flusher writes) — but a full batch (batchFrames
// frames, or as many as setBatch set) is written at once, corked or not,
// and if it was handed to the background flusher, not yet begun, this
// sender takes it back. It fails only when the connection is closed.
func (w *writer) push(head, payload []byte, soon bool) error {
	return w.pushFreeing(head, payload, soon, nil)
}

// pushFreeing is push that also takes one from *slot (unless nil), under
// the lock that queues the frame: the count drops before any flusher can
// write the frame, so a peer that has it and sends a new call never finds
// the slot still taken (Core.answering: a served call's max_calls slot).
// Taken also when the frame is dropped, the writer being closed.
func (w *writer) pushFreeing(head, payload []byte, soon bool, slot *atomic.Int32) error {
	w.mu.Lock()
	if slot != nil {
		slot.Add(-1)
	}
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
	w.frames++
	w.mark()
	full := w.frames >= int(w.batch.Load())
	if w.flushing {
		if full && w.handed == handSoon {
			// Not begun: take it back (the kick left is ignored).
			w.handed = handNone
			w.mu.Unlock()
			w.flushInline()
			return nil
		}
		w.mu.Unlock()
		return nil
	}
	if w.corked && !full {
		w.mu.Unlock()
		return nil
	}
	w.flushing = true
	if soon && !full {
		w.handed = handSoon
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
	w.frames = 0
	if len(w.segs) == 0 || w.closed != nil {
		w.flushing = false
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

// putBack returns an unwritten remainder to the front of the queue and
// hands the flush to the background flusher (the caller then wakes it).
func (w *writer) putBack(batch [][]byte) {
	w.mu.Lock()
	w.segs = append(append(make([][]byte, 0, len(batch)+len(w.segs)), batch...), w.segs...)
	w.handed = handStalled
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

// begin is the background flusher's look at the hand-over after a kick:
// with take, it takes the hand-over (it is the flusher from then on).
func (w *writer) begin(take bool) (h handoff, closed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h = w.handed
	if take {
		w.handed = handNone
	}
	return h, w.closed != nil
}

// background is the flusher of last resort: it writes what inline flushes
// could not (a full socket) and frames pushed soon, waiting for room.
func (w *writer) background() {
	var batch [][]byte
	for {
		<-w.kick
		if h, _ := w.begin(false); h == handSoon {
			// Let goroutines already runnable (callers, handlers) add
			// their frames to this write; one that fills the batch
			// meanwhile takes the flush back.
			runtime.Gosched()
		}
		h, closed := w.begin(true)
		if closed {
			return
		}
		if h == handNone {
			continue // a stale kick: the flush was taken back, or ended
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
