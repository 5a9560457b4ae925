package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"hubwire.dev/go/frame"
	"hubwire.dev/go/transport"
)

// Core is the state of one connection, shared by its reader goroutine,
// the handlers of the calls it serves and the API's handles to it. It
// sends frames (through the writer), starts and abandons the calls this
// side makes, drains, and dies. die is the one place a connection ends:
// every pending call fails at once with unavailable and a message saying
// why; every handler's context ends.
type Core struct {
	t       transport.Transport
	writer  *writer
	service Service
	names   map[string]string // the service's method names, interned
	local   *frame.Hello
	peer    *frame.Hello
	dialer  bool // we opened the connection: our call ids are odd
	wait    WaitMode
	spin    time.Duration
	stall   time.Duration // Options.WriteStallTimeout (reader.go)
	// spinUnary: low-latency with more than one CPU (see Core.Unary).
	spinUnary bool

	// The read state: used by the one goroutine reading at a time.
	rb  *readBuf
	dec *frame.Decoder
	il  inline

	mu    sync.Mutex
	calls callTable
	idle  chan struct{} // closed when a draining connection runs out of calls

	// answering: calls served that have left calls.served (so the peer
	// may reuse their ids once it has their RESPONSE) but whose RESPONSE
	// is not queued yet. Each still holds its max_calls slot: freed as
	// the RESPONSE is queued (sendResponse), not before, so that answers
	// queued for a peer that does not read stay bounded by max_calls
	// (spec/PROTOCOL.md §7.4) however long their goroutines wait to queue them.
	answering atomic.Int32
	// drainStarted mirrors calls.draining for finish, which checks it
	// after queueing a RESPONSE without taking mu on every call. Set
	// before Drain reads answering; answering drops before finish reads
	// this: one of the two sees the other (sequentially consistent).
	drainStarted atomic.Bool

	// gate holds one token per call of ours in flight: the peer's
	// max_calls. Calls beyond it queue here rather than be refused there.
	gate chan struct{}
	// dead is closed when the connection dies; why is then set.
	dead chan struct{}
}

// Peer is the peer's HELLO.
func (c *Core) Peer() *frame.Hello { return c.peer }

// Local is our HELLO.
func (c *Core) Local() *frame.Hello { return c.local }

// Transport is what the connection runs on.
func (c *Core) Transport() transport.Transport { return c.t }

// ours reports whether id is of our parity: a call we started.
func (c *Core) ours(id uint32) bool { return (id%2 == 1) == c.dialer }

// Done is closed when the connection has ended.
func (c *Core) Done() <-chan struct{} { return c.dead }

// Err is why the connection ended (nil while it is open).
func (c *Core) Err() *Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls.closed
}

func (c *Core) closedError() *Error {
	if e := c.Err(); e != nil {
		return e
	}
	return unavailable("connection closed")
}

// ---- Sending frames ----------------------------------------------------

// send queues a whole small frame.
func (c *Core) send(b []byte) error {
	if err := c.writer.push(b, nil, false); err != nil {
		return unavailable("connection closed: %v", err)
	}
	return nil
}

func (c *Core) grant(id, credit uint32) {
	var b [16]byte
	c.writer.push(frame.AppendCredit(b[:0], id, credit), nil, false)
}

func (c *Core) sendItem(id uint32, p Payload) error {
	var b [frame.HeaderLen]byte
	if err := c.writer.push(frame.AppendItemHead(b[:0], id, p.Codec, len(p.Bytes)), p.Bytes, false); err != nil {
		return unavailable("connection closed: %v", err)
	}
	return nil
}

// sendResponse sends a RESPONSE; soon when other served calls are in
// flight (the write may then wait for theirs). A response over the
// caller's max_frame is replaced by too_large. served: it ends a served
// call, whose max_calls slot (answering) is freed as it is queued.
func (c *Core) sendResponse(id uint32, p Payload, err *Error, soon, served bool) {
	var slot *atomic.Int32
	if served {
		slot = &c.answering
	}
	code, msg := frame.OK, ""
	if err != nil {
		code, msg, p = err.Code, err.Message, Payload{}
		if err.Detail != nil {
			p = *err.Detail
		}
	}
	if n := frame.ResponseBodyLen(msg, len(p.Bytes)); n > int(c.peer.MaxFrame) {
		msg = fmt.Sprintf("response of %d bytes exceeds the caller's max_frame of %d bytes", n, c.peer.MaxFrame)
		c.writer.pushFreeing(frame.AppendResponseHead(nil, id, frame.Raw, frame.TooLarge, msg, 0), nil, false, slot)
		return
	}
	var b [64]byte
	c.writer.pushFreeing(frame.AppendResponseHead(b[:0], id, p.Codec, code, msg, len(p.Bytes)), p.Bytes, soon, slot)
}

// checkSize checks a payload against the peer's max_frame.
func (c *Core) checkSize(bodyLen int, what string) *Error {
	if bodyLen > int(c.peer.MaxFrame) {
		return Errorf(frame.TooLarge, "%s of %d bytes exceeds the peer's max_frame of %d bytes", what, bodyLen, c.peer.MaxFrame)
	}
	return nil
}

// ---- Calls we start ----------------------------------------------------

// acquire takes a slot of the peer's max_calls, waiting if all are taken.
func (c *Core) acquire(ctx context.Context) *Error {
	select {
	case c.gate <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.gate <- struct{}{}:
		return nil
	case <-c.dead:
		return c.closedError()
	case <-ctx.Done():
		return ctxError(ctx, "waiting for a slot of the peer's max_calls")
	}
}

func (c *Core) release() { <-c.gate }

// begin starts a call: checks its size, takes a slot, registers it and
// sends its REQUEST with the time left before ctx's deadline.
//
// The call's alone field says whether it was the only call in flight when
// it started.
//
// If the REQUEST cannot be queued, the call is already in the table: begin
// ends the connection and returns the error, and that end (or one already
// under way) still finishes the call, so its state must not be reused.
func (c *Core) begin(ctx context.Context, call *outCall, method string, kind frame.Kind, input Payload) *Error {
	if len(method) == 0 || len(method) > 255 {
		return Errorf(frame.InvalidArgument, "method name must be 1-255 bytes, got %d", len(method))
	}
	if err := c.checkSize(frame.RequestBodyLen(method, len(input.Bytes)), "request"); err != nil {
		return err
	}
	var timeoutMs uint32
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		if left <= 0 {
			return Errorf(frame.DeadlineExceeded, "deadline exceeded before the call started")
		}
		timeoutMs = uint32(min((left+time.Millisecond-1)/time.Millisecond, 1<<32-1))
	}
	if err := c.acquire(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	if e := c.calls.closed; e != nil {
		c.mu.Unlock()
		c.release()
		return e
	}
	if c.calls.peerDraining {
		c.mu.Unlock()
		c.release()
		return unavailable("peer is draining (GOAWAY); start the call elsewhere")
	}
	call.id = c.calls.allocID()
	c.calls.out[call.id] = call
	inFlight := len(c.calls.out)
	pipelined := inFlight > 1
	call.alone = !pipelined
	c.mu.Unlock()
	if pipelined {
		// Other calls in flight: their REQUESTs come in a burst of about
		// inFlight frames, which leaves in batches of half of it
		// (writer.setBatch).
		c.writer.setBatch(inFlight)
	}
	var b [frame.HeaderLen + 5 + 255]byte
	head := frame.AppendRequestHead(b[:0], call.id, kind, input.Codec, timeoutMs, method, len(input.Bytes))
	if err := c.writer.push(head, input.Bytes, pipelined); err != nil {
		// The write failed before the reader saw the peer go: end the
		// connection now, so every call agrees with this one's error.
		e := unavailable("connection closed: %v", err)
		c.die(e)
		return e
	}
	return nil
}

// takeOut removes a call we started from the table (its answer arrived,
// or we abandon it) and frees its slot; false if it was already gone.
func (c *Core) takeOut(call *outCall) bool {
	c.mu.Lock()
	ok := c.calls.out[call.id] == call
	if ok {
		delete(c.calls.out, call.id)
		c.checkDrained()
	}
	c.mu.Unlock()
	if ok {
		c.release()
	}
	return ok
}

// live reports whether a call we started is still in the table.
func (c *Core) live(call *outCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls.out[call.id] == call
}

// cancelOut abandons a call we started: forgets it and sends CANCEL, if it
// was still pending. Reports whether it was.
func (c *Core) cancelOut(call *outCall) bool {
	if !c.takeOut(call) {
		return false
	}
	if call.credit != nil {
		call.credit.close(Errorf(frame.Cancelled, "the call was cancelled"))
	}
	var b [frame.HeaderLen]byte
	c.writer.push(frame.AppendSimple(b[:0], frame.TypeCancel, call.id), nil, false)
	return true
}

// ---- The connection's life -------------------------------------------

// Ping sends a PING and waits for its PONG; returns the round trip.
func (c *Core) Ping(ctx context.Context) (time.Duration, error) {
	ch := make(chan struct{})
	c.mu.Lock()
	if e := c.calls.closed; e != nil {
		c.mu.Unlock()
		return 0, e
	}
	c.calls.pingSeq++
	seq := c.calls.pingSeq
	c.calls.pings[seq] = ch
	c.mu.Unlock()
	start := time.Now()
	var data [8]byte
	binary.LittleEndian.PutUint64(data[:], seq)
	if err := c.send(frame.AppendPing(nil, frame.TypePing, data)); err != nil {
		return 0, err
	}
	select {
	case <-ch:
		return time.Since(start), nil
	case <-c.dead:
		return 0, c.closedError()
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.calls.pings, seq)
		c.mu.Unlock()
		return 0, ctxError(ctx, "waiting for PONG")
	}
}

// checkDrained, called with mu held, tells Drain (closes idle) once a
// draining connection has no call in either table and no served call's
// RESPONSE still on its way to the write queue (answering).
func (c *Core) checkDrained() {
	if !c.calls.draining || !c.calls.idle() || c.answering.Load() != 0 {
		return
	}
	select {
	case <-c.idle:
	default:
		close(c.idle)
	}
}

// Drain sends GOAWAY ok (the peer starts no new calls), refuses new calls,
// waits until the calls in flight either way are done or ctx ends, then
// closes.
func (c *Core) Drain(ctx context.Context) {
	c.mu.Lock()
	c.calls.draining = true
	c.drainStarted.Store(true)
	last := c.calls.lastPeerID
	c.checkDrained()
	c.mu.Unlock()
	c.send(frame.AppendGoaway(nil, last, frame.OK, "draining"))
	select {
	case <-c.idle:
	case <-c.dead:
	case <-ctx.Done():
	}
	c.writer.flushed(100 * time.Millisecond)
	c.die(unavailable("connection closed locally"))
}

// Close ends the connection now: calls in flight fail with unavailable.
func (c *Core) Close() { c.die(unavailable("connection closed locally")) }

// die ends the connection: fails every pending call with err, stops every
// handler, closes the transport. Idempotent.
func (c *Core) die(err *Error) {
	if c.end(err) {
		c.t.Close()
	}
}

// end is die without closing the transport: after a fatal GOAWAY the
// reader lingers on it first (spec/PROTOCOL.md §7.3). False if the
// connection had already ended.
func (c *Core) end(err *Error) bool {
	c.mu.Lock()
	if c.calls.closed != nil {
		c.mu.Unlock()
		return false
	}
	c.calls.closed = err
	out, serving := c.calls.out, c.calls.served
	c.calls.out, c.calls.served = map[uint32]*outCall{}, map[uint32]*served{}
	c.calls.pings = map[uint64]chan struct{}{}
	c.mu.Unlock()
	close(c.dead)
	for _, call := range out {
		call.finish(Payload{}, err)
		c.release()
	}
	for _, s := range serving {
		s.cancel(context.Canceled, err)
	}
	c.writer.close(err.Message)
	return true
}

// How long a connection that sent a fatal GOAWAY goes on reading (and
// discarding) what the peer still sends, and how much at most (§7.3).
const (
	lingerTime  = time.Second
	lingerBytes = 1 << 20
)

// linger closes t after a fatal GOAWAY has been written (§7.3): it shuts
// down our sending side only, reads and discards until end of stream, an
// error, lingerBytes or lingerTime, then closes, so that closing with
// unread input does not make the kernel reset the connection before the
// peer has read the GOAWAY.
func linger(t transport.Transport) {
	t.CloseWrite()
	timer := time.AfterFunc(lingerTime, func() { t.Close() })
	defer timer.Stop()
	buf := make([]byte, 64<<10)
	for left := lingerBytes; left > 0; {
		n, err := t.Read(buf)
		if err != nil {
			break
		}
		left -= n
	}
	t.Close()
}
