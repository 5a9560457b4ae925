package engine

import (
	"context"
	"errors"

	"hubwire.dev/go/frame"
)

func asError(e error, target **Error) bool { return errors.As(e, target) }

// RecvStream is the receiving half of a stream, payloads as they travel:
// a caller's outputs (server_stream, bidi) or a handler's inputs
// (client_stream, bidi). It grants credit back as items are taken.
type RecvStream struct {
	core   *Core
	id     uint32
	items  *inbox
	window *recvWindow
	ctx    context.Context // the call's: its end ends the wait
	caller *outCall        // set for a caller's stream: abandoning it cancels the call
	done   bool
	err    *Error
}

// Recv returns the next item; io.EOF-like end is (Payload{}, false, nil);
// an error is the call's status.
func (r *RecvStream) Recv() (p Payload, ok bool, err *Error) {
	if r.done {
		return Payload{}, false, r.err
	}
	e, got := r.items.pop(r.ctx)
	if !got {
		r.done = true
		r.err = ctxError(r.ctx, "while waiting for the next item")
		if r.caller != nil {
			r.core.cancelOut(r.caller)
		}
		return Payload{}, false, r.err
	}
	if e.end {
		r.done = true
		r.err = e.err
		return Payload{}, false, e.err
	}
	if credit := r.window.consumedOne(); credit > 0 {
		r.core.grant(r.id, credit)
	}
	return e.p, true, nil
}

// SendStream is the sending half of a stream: a caller's inputs
// (client_stream, bidi) or a handler's outputs (server_stream, bidi). Each
// item waits for credit (spec/PROTOCOL.md §8).
type SendStream struct {
	core   *Core
	id     uint32
	codec  frame.Codec // the call's: a handler answers in the request's codec
	credit *sendCredit
	ctx    context.Context
	caller *outCall
}

// Codec is the call's codec.
func (s *SendStream) Codec() frame.Codec { return s.codec }

// Send sends one item, waiting for credit while the receiver is behind.
// It fails once the call has ended (the callee may answer early; the
// answer then says how), or when the call's context ends.
func (s *SendStream) Send(p Payload) error {
	if err := s.core.checkSize(len(p.Bytes), "item"); err != nil {
		if s.caller != nil {
			s.core.cancelOut(s.caller)
			s.caller.finish(Payload{}, err)
		}
		return err
	}
	if err := s.credit.acquire(s.ctx); err != nil {
		if s.caller != nil && s.ctx.Err() != nil {
			s.core.cancelOut(s.caller)
		}
		return err
	}
	s.core.writer.ready(s.ctx)
	return s.core.sendItem(s.id, p)
}

// CloseSend ends a caller's inputs: END. The call goes on until the callee
// answers. Closing twice, or after the call ended, does nothing; on a
// handler's stream (whose outputs end with its answer) it does nothing.
func (s *SendStream) CloseSend() error {
	if s.caller == nil || s.credit.isClosed() || !s.core.live(s.caller) {
		return nil
	}
	s.credit.close(Errorf(frame.Cancelled, "CloseSend was called: no more items can be sent"))
	return s.core.send(frame.AppendSimple(nil, frame.TypeEnd, s.id))
}
