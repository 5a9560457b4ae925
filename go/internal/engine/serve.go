package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"hubwire.dev/go/frame"
)

// The serving seam: what the engine knows about serving calls is one
// interface, Service, and one value per call, Incoming.
//
// When a REQUEST arrives the engine does the protocol's half (onRequest):
// the id's parity, a live id reused, draining, max_calls, registering the
// call so its ITEMs, END, CREDIT and CANCEL reach it, the deadline. It then
// runs the service's Call in a goroutine of its own — a panic there is a
// defect for that call only — and answers with what it returns, unless the
// call was cancelled or its deadline passed first (then the engine has
// answered, or must not).

// Service is whatever serves the calls that arrive on a connection: a
// hubwire.Provider, or a relay. This is all the engine knows about serving.
type Service interface {
	// Methods are the methods offered, advertised in HELLO; asked once as
	// each connection opens.
	Methods() []frame.MethodInfo
	// Call serves one call, whatever its method, and returns the RESPONSE
	// payload (empty for the kinds that answer with ITEMs) or the call's
	// error: an *Error keeps its code, anything else is a defect. ctx is
	// the call's *CallContext.
	Call(ctx context.Context, call *Incoming) (Payload, error)
}

// Incoming is one call handed to a Service: what was asked, and the halves
// of its streams.
type Incoming struct {
	// Method is the method called.
	Method string
	// Kind is the kind the caller asked for.
	Kind frame.Kind
	// Input is the REQUEST payload as it arrived (empty for the kinds that
	// stream in).
	Input Payload
	// Items are the caller's ITEMs (client_stream, bidi), else nil.
	Items *RecvStream
	// Sink takes ITEMs to the caller (server_stream, bidi), else nil.
	Sink *SendStream
}

// served is a call this side serves: its context, its streams, its timer.
// One allocation holds all of it, the Incoming included.
type served struct {
	ctx    CallContext
	in     Incoming
	items  *inbox
	window *recvWindow
	credit *sendCredit
	timer  *time.Timer
}

// cancel stops the handler: its context ends, its sends fail.
func (s *served) cancel(err error, cause *Error) {
	s.ctx.cancel(err, cause)
	if s.credit != nil {
		s.credit.close(cause)
	}
	if s.timer != nil {
		s.timer.Stop()
	}
}

// onRequest handles a REQUEST; last says no other frame is buffered
// behind it. inlined: its handler ran on this goroutine (see inline.go);
// handedOff: and meanwhile another goroutine took over reading. An error
// is a protocol error: the connection closes.
func (c *Core) onRequest(f *frame.Frame, last bool) (inlined, handedOff bool, ferr *frame.Error) {
	id := f.CallID
	if c.ours(id) {
		return false, false, &frame.Error{Code: frame.ProtocolError, Message: fmt.Sprintf("REQUEST with call id %d of the receiver's parity", id)}
	}
	method, ok := c.names[string(f.Method)]
	if !ok {
		method = string(f.Method)
	}
	if c.service == nil {
		c.sendResponse(id, Payload{}, Errorf(frame.UnknownMethod, "unknown method %q: this side offers no methods", method), false, false)
		return false, false, nil
	}
	s := &served{}
	s.ctx = CallContext{Method: method, ID: id, Kind: f.Kind, Peer: c.peer}
	if f.TimeoutMs > 0 {
		s.ctx.deadline = time.Now().Add(time.Duration(f.TimeoutMs) * time.Millisecond)
	}
	s.in.Method, s.in.Kind = method, f.Kind
	s.in.Input = Payload{Codec: f.Codec, Bytes: f.Payload}
	if f.Kind.StreamsIn() {
		s.items, s.window = newInbox(), newRecvWindow(c.local.Window)
		s.in.Items = &RecvStream{core: c, id: id, items: s.items, window: s.window, ctx: &s.ctx}
	}
	if f.Kind.StreamsOut() {
		s.credit = newSendCredit(c.peer.Window)
		s.in.Sink = &SendStream{core: c, id: id, codec: f.Codec, credit: s.credit, ctx: &s.ctx}
	}
	c.mu.Lock()
	if _, live := c.calls.served[id]; live {
		c.mu.Unlock()
		return false, false, &frame.Error{Code: frame.ProtocolError, Message: fmt.Sprintf("REQUEST for call id %d, which is already live", id)}
	}
	c.calls.lastPeerID = id // the latest, not the numerically largest: ids wrap (§5.10)
	var refusal *Error
	switch {
	case c.calls.draining:
		refusal = unavailable("provider is draining (GOAWAY); retry elsewhere")
	case len(c.calls.served)+int(c.answering.Load()) >= int(c.local.MaxCalls):
		refusal = Errorf(frame.ResourceExhausted, "too many calls in flight: the limit (max_calls) is %d", c.local.MaxCalls)
	}
	if refusal != nil {
		c.mu.Unlock()
		c.sendResponse(id, Payload{}, refusal, false, false)
		return false, false, nil
	}
	c.calls.served[id] = s
	c.mu.Unlock()
	if !s.ctx.deadline.IsZero() {
		s.timer = time.AfterFunc(time.Until(s.ctx.deadline), func() {
			c.finish(s, Payload{}, Errorf(frame.DeadlineExceeded, "deadline exceeded in the handler"), context.DeadlineExceeded)
		})
	}
	if f.Kind == frame.Unary && c.inlines(method) {
		return true, c.runInline(s, last), nil
	}
	go c.run(s)
	return false, false, nil
}

// run runs one call's handler and answers.
func (c *Core) run(s *served) {
	var p Payload
	var err *Error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = Errorf(frame.Defect, "handler panicked: %v", r)
				if debugPanics {
					err.Message += "\n" + string(debug.Stack())
				}
			}
		}()
		var e error
		p, e = c.service.Call(&s.ctx, &s.in)
		if e != nil {
			err = AsError(e)
		}
	}()
	c.finish(s, p, err, context.Canceled)
}

// errCallEnded is why a handler's sends fail once it has answered (one
// value: no allocation per call).
var errCallEnded = &Error{Code: frame.Cancelled, Message: "the call has ended; no more items can be sent"}

// debugPanics adds the stack to a panic's defect message (tests).
var debugPanics = false

// AsError turns a handler's error into the call's status: an *Error
// (anywhere in the chain) keeps its code, anything else is a defect.
func AsError(e error) *Error {
	var he *Error
	if asError(e, &he) {
		return he
	}
	return Errorf(frame.Defect, "%v", e)
}

// finish forgets a served call and sends its RESPONSE, unless it was
// already finished (cancelled, deadline, connection died). The entry is
// removed only if it is still this call: once a call was cancelled the
// peer may reuse its id at once. It is removed before the RESPONSE is
// queued, as the peer may reuse the id once it has that; but the call
// keeps its max_calls slot (answering) until the RESPONSE is queued: the
// goroutine may wait a while in between (for a processor, or the writer's
// lock), and a reader that took a new call in its place meanwhile would
// let more than max_calls answers queue for a peer that does not read
// (spec/PROTOCOL.md §7.4).
func (c *Core) finish(s *served, p Payload, err *Error, ctxErr error) {
	c.mu.Lock()
	live := c.calls.served[s.ctx.ID] == s
	if live {
		delete(c.calls.served, s.ctx.ID)
		c.answering.Add(1)
	}
	more := len(c.calls.served) > 0
	c.mu.Unlock()
	if !live {
		return
	}
	why := err
	if why == nil {
		why = errCallEnded
	}
	s.cancel(ctxErr, why)
	if testHookBeforeAnswer != nil {
		testHookBeforeAnswer()
	}
	c.sendResponse(s.ctx.ID, p, err, more, true)
	// Only now, with the RESPONSE queued, may a drain that found this
	// call gone from the table end the connection (Drain flushes the
	// queue, then closes). Checked before, the answer could be dropped
	// by a close that came between the table and the queue.
	if c.drainStarted.Load() {
		c.mu.Lock()
		c.checkDrained()
		c.mu.Unlock()
	}
}

// testHookBeforeAnswer, when set by a test, runs between a served call
// leaving the table and its RESPONSE being queued.
var testHookBeforeAnswer func()
