package engine

import (
	"context"
	"runtime"
	"sync"
	"time"

	"hubwire.dev/go/frame"
)

// The call table of a connection: calls this side started (out) and calls
// it serves (served), keyed by call id, plus the bookkeeping the reader
// needs to route every frame to its call (spec/PROTOCOL.md §3: the
// dialer's ids are odd, the acceptor's even).

// event is what the reader delivers to a stream: one ITEM's payload, or
// the end (err nil: a clean end; final is the RESPONSE payload, if any).
type event struct {
	p   Payload
	end bool
	err *Error
}

// inbox is the receiving half of a stream as the reader fills it. It is
// unbounded in code but bounded by flow control: the reader refuses an
// ITEM beyond the credit granted, so it never holds more than the window
// (plus the end).
type inbox struct {
	mu     sync.Mutex
	q      []event
	head   int
	ended  bool
	signal chan struct{} // one token: "the queue changed"
}

func newInbox() *inbox { return &inbox{signal: make(chan struct{}, 1)} }

func (b *inbox) push(e event) {
	b.mu.Lock()
	if b.ended {
		b.mu.Unlock()
		return
	}
	b.ended = e.end
	b.q = append(b.q, e)
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

// pop takes the next event, waiting until there is one or ctx is done.
func (b *inbox) pop(ctx context.Context) (event, bool) {
	for {
		b.mu.Lock()
		if b.head < len(b.q) {
			e := b.q[b.head]
			b.q[b.head] = event{}
			b.head++
			if b.head == len(b.q) {
				b.q, b.head = b.q[:0], 0
			}
			b.mu.Unlock()
			return e, true
		}
		b.mu.Unlock()
		select {
		case <-b.signal:
		case <-ctx.Done():
			return event{}, false
		}
	}
}

// result is a unary or client-stream call's outcome.
type result struct {
	p   Payload
	err *Error
}

// outCall is a call this side started, between its REQUEST and its end.
type outCall struct {
	id     uint32
	alone  bool        // the only call in flight when it started
	done   chan result // unary, client_stream: the RESPONSE
	items  *inbox      // server_stream, bidi: ITEMs, then the end
	window *recvWindow // credit we granted for the callee's ITEMs
	credit *sendCredit // credit for our ITEMs (client_stream, bidi)
}

// finish delivers the call's outcome and releases anyone waiting to send.
func (c *outCall) finish(p Payload, err *Error) {
	if c.credit != nil {
		why := err
		if why == nil {
			why = errCallEnded
		}
		c.credit.close(why)
	}
	if c.items != nil {
		c.items.push(event{p: p, end: true, err: err})
		return
	}
	c.done <- result{p, err}
}

// unaryPool recycles the state of unary calls that ended normally, so a
// unary call allocates nothing of its own. A state goes back only once its
// one outcome has been taken from done: whoever removes a call from the
// table finishes it exactly once, so before that a connection may still
// write to it.
var unaryPool = sync.Pool{New: func() any { return &outCall{done: make(chan result, 1)} }}

// callTable is the mutable state of a connection's calls, under one lock.
type callTable struct {
	out          map[uint32]*outCall
	served       map[uint32]*served
	nextID       uint32
	firstID      uint32
	closed       *Error // set once, when the connection dies
	peerDraining bool   // the peer sent GOAWAY ok: start no new calls
	draining     bool   // we sent GOAWAY ok: accept no new calls
	lastPeerID   uint32 // the id of the peer's last REQUEST: the highest in §3's order (GOAWAY's call_id)
	pings        map[uint64]chan struct{}
	pingSeq      uint64
}

func newCallTable(dialer bool) callTable {
	first := uint32(2)
	if dialer {
		first = 1
	}
	return callTable{out: map[uint32]*outCall{}, served: map[uint32]*served{}, nextID: first, firstID: first, pings: map[uint64]chan struct{}{}}
}

// allocID returns the next free id of our parity. Ids wrap around to the
// first one past 2³²−1, skipping ids still in flight.
func (t *callTable) allocID() uint32 {
	for {
		id := t.nextID
		if id > ^uint32(0)-2 {
			t.nextID = t.firstID
		} else {
			t.nextID = id + 2
		}
		if _, busy := t.out[id]; !busy {
			return id
		}
	}
}

// idle reports whether no call is left either way.
func (t *callTable) idle() bool { return len(t.out) == 0 && len(t.served) == 0 }

// Unary makes a unary call with a payload as it travels and waits for the
// answer. ctx's deadline goes on the wire; ctx ending first sends CANCEL.
// The answer's bytes are the caller's to keep.
func (c *Core) Unary(ctx context.Context, method string, input Payload) (Payload, error) {
	call := unaryPool.Get().(*outCall)
	if err := c.begin(ctx, call, method, frame.Unary, input); err != nil {
		// Not put back: begin may have failed after registering the call
		// (its REQUEST could not be queued), and then the connection's
		// end finishes it like every pending call, sending an outcome on
		// done, maybe after we return. Recycled, the state would hand
		// that outcome to the next unary call on whatever connection, and
		// stay in this connection's table under the new call's feet. A
		// failed call may allocate.
		return Payload{}, err
	}
	if c.spinUnary && call.alone {
		// Low-latency: the reader spins for the answer on this processor;
		// wait for it here without parking, so that delivering it wakes
		// nobody (a parked caller would be made runnable, and the
		// scheduler would wake a second thread for it).
		start := time.Now()
		for len(call.done) == 0 && time.Since(start) < c.spin {
			runtime.Gosched()
		}
	}
	select {
	case r := <-call.done:
		unaryPool.Put(call)
		if r.err != nil {
			return Payload{}, r.err
		}
		return r.p, nil
	case <-ctx.Done():
		// The call may have been answered meanwhile; then its result is
		// in the channel and the state is not reused.
		c.cancelOut(call)
		return Payload{}, ctxError(ctx, "waiting for the response")
	}
}

// Streams are the parts of a streaming call this side started: where its
// inputs go (client_stream, bidi), its outputs (server_stream, bidi), and
// for client_stream the single answer.
type Streams struct {
	Send *SendStream
	Recv *RecvStream
	call *outCall
	ctx  context.Context
	stop func() bool
	core *Core
}

// Start starts a call of a streaming kind. The call ends at its RESPONSE,
// when ctx ends (CANCEL), or at Abandon.
func (c *Core) Start(ctx context.Context, method string, kind frame.Kind, input Payload) (*Streams, error) {
	call := &outCall{}
	if kind.StreamsOut() {
		call.items, call.window = newInbox(), newRecvWindow(c.local.Window)
	} else {
		call.done = make(chan result, 1)
	}
	if kind.StreamsIn() {
		call.credit = newSendCredit(c.peer.Window)
	}
	if err := c.begin(ctx, call, method, kind, input); err != nil {
		return nil, err
	}
	s := &Streams{call: call, ctx: ctx, core: c}
	if call.items != nil {
		s.Recv = &RecvStream{core: c, id: call.id, items: call.items, window: call.window, ctx: ctx, caller: call}
	}
	if call.credit != nil {
		s.Send = &SendStream{core: c, id: call.id, codec: input.Codec, credit: call.credit, ctx: ctx, caller: call}
	}
	if ctx.Done() != nil {
		s.stop = context.AfterFunc(ctx, func() {
			if c.cancelOut(call) {
				call.finish(Payload{}, ctxError(ctx, "the call's context ended"))
			}
		})
	}
	return s, nil
}

// Response waits for a client_stream call's answer.
func (s *Streams) Response() (Payload, error) {
	select {
	case r := <-s.call.done:
		s.release()
		if r.err != nil {
			return Payload{}, r.err
		}
		return r.p, nil
	case <-s.ctx.Done():
		s.core.cancelOut(s.call)
		return Payload{}, ctxError(s.ctx, "waiting for the response")
	}
}

// Abandon cancels the call if it is still going (CANCEL), and stops
// watching its context.
func (s *Streams) Abandon() {
	if s.core.cancelOut(s.call) {
		s.call.finish(Payload{}, Errorf(frame.Cancelled, "the call was abandoned by its caller"))
	}
	s.release()
}

func (s *Streams) release() {
	if s.stop != nil {
		s.stop()
	}
}
