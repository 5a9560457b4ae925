package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"time"

	"hubwire.dev/go/frame"
)

// The one reader goroutine of a connection: reads as many bytes as are
// there, parses every complete frame, routes each to its call (a REQUEST
// to the serving seam), and waits for more the way the connection's
// WaitMode says. Bad input ends the connection with GOAWAY (§7.1).
//
// While our write queue is over its cap (the peer is not reading what we
// send), a new REQUEST or PING from the peer is held, and nothing more is
// read, until the queue drains; if it stays over the cap for
// Options.WriteStallTimeout, the connection is closed with GOAWAY
// resource_exhausted. Other frames are always read.

func (c *Core) readLoop(sp spinner) {
	rb, dec := c.rb, c.dec
	delivered := false
	for {
		// Frames the reader itself sends while it dispatches one read
		// (CREDIT, PONG, refusals) leave in one write.
		c.writer.cork()
		handedOff, held, requests, ferr := c.dispatchAll(rb, dec, &delivered)
		if handedOff {
			return // another goroutine reads now (see inline.go)
		}
		if requests > 1 {
			// The peer has at least that many calls in flight: our
			// answers to its next burst leave in batches of half of it
			// (writer.setBatch).
			c.writer.setBatch(requests)
		}
		c.writer.uncork()
		if ferr != nil {
			c.failProtocol(ferr)
			return
		}
		if held {
			// The peer's new call waits, unread, and its writes stop at its full socket.
			ctx, cancel := context.WithTimeout(context.Background(), c.stall)
			c.writer.ready(ctx)
			cancel()
			if c.writer.overCap() {
				c.failProtocol(&frame.Error{
					Code:    frame.ResourceExhausted,
					Message: "the peer has not read our last frames for " + c.stall.String() + " (write queue over its cap)",
				})
				return
			}
			continue
		}
		select {
		case <-c.dead:
			return
		default:
		}
		need, _ := dec.Check(rb.unread())
		n, err := c.readMore(rb.room(need), &sp, &delivered)
		rb.w += n
		if err != nil {
			if errors.Is(err, io.EOF) {
				if ferr := dec.Finish(rb.unread()); ferr != nil {
					c.failProtocol(ferr)
					return
				}
				c.die(unavailable("connection closed by peer (end of stream)"))
				return
			}
			c.die(unavailable("connection lost: read failed: %v", err))
			return
		}
	}
}

// dispatchAll dispatches every complete frame buffered. handedOff: a
// handler this goroutine ran inline was slow, and another goroutine has
// taken over reading; this one must stop touching the read state. held: a
// REQUEST or PING arrived while the write queue is over its cap; it stays
// unread, first in the buffer, until the queue drains. requests: the
// REQUESTs dispatched, which size the writer's batches (readLoop).
func (c *Core) dispatchAll(rb *readBuf, dec *frame.Decoder, delivered *bool) (handedOff, held bool, requests int, ferr *frame.Error) {
	for {
		f, n, err := dec.Decode(rb.unread())
		if err != nil {
			return false, false, requests, err
		}
		if n == 0 {
			return false, false, requests, nil
		}
		if (f.Type == frame.TypeRequest || f.Type == frame.TypePing) && c.writer.overCap() {
			return false, true, requests, nil
		}
		rb.r += n
		if f.Type == frame.TypeRequest {
			requests++
			inlined, handedOff, err := c.onRequest(&f, rb.r == rb.w)
			if err != nil || handedOff {
				return handedOff, false, requests, err
			}
			*delivered = *delivered || !inlined
			continue
		}
		woke, err := c.dispatch(&f)
		if err != nil {
			return false, false, requests, err
		}
		*delivered = *delivered || woke
	}
}

// readMore reads at least one byte, waiting as the mode says.
func (c *Core) readMore(p []byte, sp *spinner, delivered *bool) (int, error) {
	if !sp.enabled() {
		return c.t.Read(p)
	}
	if *delivered {
		// Goroutines this read woke (a caller, a handler) run first, on
		// this processor, before the spin.
		*delivered = false
		runtime.Gosched()
	}
	if n, err, ok := sp.spin(c.t, p); ok {
		return n, err
	}
	return c.t.Read(p)
}

// failProtocol: the peer's bytes were bad. GOAWAY with the error, then
// close (spec/PROTOCOL.md §7.1).
func (c *Core) failProtocol(e *frame.Error) {
	c.mu.Lock()
	last := c.calls.lastPeerID
	c.mu.Unlock()
	if c.send(frame.AppendGoaway(nil, last, e.Code, e.Message)) == nil {
		c.writer.flushed(time.Second)
	}
	// The pending calls fail now; the transport lingers, then closes (§7.3).
	if c.end(unavailable("connection closed: sent GOAWAY %s: %s", e.Code, e.Message)) {
		linger(c.t)
	}
}

// dispatch routes one frame; woke reports whether that made another
// goroutine runnable. An error is a protocol error.
func (c *Core) dispatch(f *frame.Frame) (woke bool, err *frame.Error) {
	switch f.Type {
	case frame.TypePing:
		var b [20]byte
		c.writer.push(frame.AppendPing(b[:0], frame.TypePong, f.Data), nil, false)
	case frame.TypeResponse:
		c.mu.Lock()
		call := c.calls.out[f.CallID]
		if call != nil {
			delete(c.calls.out, f.CallID)
			c.checkDrained()
		}
		c.mu.Unlock()
		if call == nil {
			return false, nil
		}
		c.release()
		switch f.Code {
		case frame.OK:
			call.finish(Payload{Codec: f.Codec, Bytes: f.Payload}, nil)
		case frame.Failure:
			detail := &Payload{Codec: f.Codec, Bytes: f.Payload}
			call.finish(Payload{}, &Error{Code: f.Code, Message: string(f.Message), Detail: detail})
		default:
			call.finish(Payload{}, &Error{Code: f.Code, Message: string(f.Message)})
		}
		return true, nil
	case frame.TypeItem:
		return true, c.onItem(f)
	case frame.TypeEnd:
		c.mu.Lock()
		s := c.calls.served[f.CallID]
		c.mu.Unlock()
		if s != nil && s.items != nil {
			s.items.push(event{end: true})
			return true, nil
		}
	case frame.TypeCancel:
		c.mu.Lock()
		s := c.calls.served[f.CallID]
		if s != nil {
			delete(c.calls.served, f.CallID)
			c.checkDrained()
		}
		c.mu.Unlock()
		if s != nil {
			s.cancel(context.Canceled, Errorf(frame.Cancelled, "the caller cancelled the call"))
			return true, nil
		}
	case frame.TypeCredit:
		var credit *sendCredit
		c.mu.Lock()
		if c.ours(f.CallID) {
			if call := c.calls.out[f.CallID]; call != nil {
				credit = call.credit
			}
		} else if s := c.calls.served[f.CallID]; s != nil {
			credit = s.credit
		}
		c.mu.Unlock()
		if credit != nil {
			credit.add(f.Credit)
		}
	case frame.TypePong:
		seq := binary.LittleEndian.Uint64(f.Data[:])
		c.mu.Lock()
		ch := c.calls.pings[seq]
		delete(c.calls.pings, seq)
		c.mu.Unlock()
		if ch != nil {
			close(ch)
			return true, nil
		}
	case frame.TypeGoaway:
		c.onGoaway(f)
	case frame.TypeHello:
		return false, &frame.Error{Code: frame.ProtocolError, Message: "unexpected second HELLO"}
	}
	return false, nil
}

func (c *Core) onItem(f *frame.Frame) *frame.Error {
	id := f.CallID
	p := Payload{Codec: f.Codec, Bytes: f.Payload}
	overrun := func() *Error {
		return Errorf(frame.ResourceExhausted, "call %d: ITEM beyond the flow-control credit granted", id)
	}
	c.mu.Lock()
	if c.ours(id) {
		call := c.calls.out[id]
		if call == nil {
			c.mu.Unlock()
			return nil
		}
		if call.items == nil {
			c.mu.Unlock()
			return &frame.Error{Code: frame.ProtocolError, Message: "ITEM for call " + itoa(id) + ", which has no stream from the callee"}
		}
		if call.window.onItem() {
			c.mu.Unlock()
			call.items.push(event{p: p})
			return nil
		}
		c.mu.Unlock()
		if c.cancelOut(call) {
			call.finish(Payload{}, overrun())
		}
		return nil
	}
	s := c.calls.served[id]
	if s == nil {
		c.mu.Unlock()
		return nil
	}
	if s.items == nil {
		c.mu.Unlock()
		return &frame.Error{Code: frame.ProtocolError, Message: "ITEM for call " + itoa(id) + ", which takes no stream from the caller"}
	}
	if s.window.onItem() {
		c.mu.Unlock()
		s.items.push(event{p: p})
		return nil
	}
	c.mu.Unlock()
	c.finish(s, Payload{}, overrun(), context.Canceled)
	return nil
}

func (c *Core) onGoaway(f *frame.Frame) {
	if f.Code != frame.OK {
		c.die(unavailable("connection closed: peer sent GOAWAY %s: %s", f.Code, f.Message))
		return
	}
	// The peer drains: calls it never saw fail now (safe to retry).
	var unseen []*outCall
	c.mu.Lock()
	c.calls.peerDraining = true
	for id, call := range c.calls.out {
		if frame.IDAfter(id, f.CallID) {
			unseen = append(unseen, call)
			delete(c.calls.out, id)
		}
	}
	c.mu.Unlock()
	for _, call := range unseen {
		c.release()
		call.finish(Payload{}, unavailable("peer is draining (GOAWAY) and never saw this call; safe to retry"))
	}
}

func itoa(n uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
