package hubwire

import (
	"io"
	"iter"

	"hubwire.dev/go/internal/engine"
)

// The two halves of a stream, both directions, both roles: ItemStream
// receives (granting credit back as items are taken), ItemSink sends
// (waiting for credit). The same types serve a caller's streams and a
// handler's, so flow control is written once (in the engine).

// ItemStream is the receiving half of a stream: a caller's outputs, or a
// handler's inputs, decoded as T, in order.
type ItemStream[T any] struct {
	rs         *engine.RecvStream
	vc         valueCodec[T]
	decodeCode Code            // invalid_argument in a handler, internal in a caller
	call       *engine.Streams // a caller's: Close abandons the call
}

func newItemStream[T any](rs *engine.RecvStream, decodeCode Code, call *engine.Streams) *ItemStream[T] {
	return &ItemStream[T]{rs: rs, vc: codecOf[T](), decodeCode: decodeCode, call: call}
}

// Recv returns the next item; io.EOF when the stream ended normally; the
// call's *Error when it did not (a failure, the deadline, a lost peer).
func (s *ItemStream[T]) Recv() (T, error) {
	var zero T
	p, ok, err := s.rs.Recv()
	if err != nil {
		if s.call != nil {
			s.call.Abandon()
		}
		return zero, err
	}
	if !ok {
		if s.call != nil {
			s.call.Abandon() // ended: stops watching the context
		}
		return zero, io.EOF
	}
	v, derr := s.vc.decode(p)
	if derr != nil {
		return zero, Errorf(s.decodeCode, "cannot decode item: %v", derr)
	}
	return v, nil
}

// All ranges over the rest of the stream: each item with a nil error, then
// the stream's error once if it did not end normally. Leaving the loop
// early abandons a caller's call (CANCEL), as Close does.
func (s *ItemStream[T]) All() iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			v, err := s.Recv()
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(v, err)
				return
			}
			if !yield(v, nil) {
				s.Close()
				return
			}
		}
	}
}

// Collect reads the rest of the stream into a slice.
func (s *ItemStream[T]) Collect() ([]T, error) {
	var out []T
	for v, err := range s.All() {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Close abandons a caller's stream before its end: the call is cancelled
// (CANCEL). On a handler's stream, or after the end, it does nothing.
func (s *ItemStream[T]) Close() {
	if s.call != nil {
		s.call.Abandon()
	}
}

// ItemSink is the sending half of a stream: a caller's inputs, or a
// handler's outputs, of type T.
type ItemSink[T any] struct {
	ss     *engine.SendStream
	vc     valueCodec[T]
	caller bool
}

func newItemSink[T any](ss *engine.SendStream, caller bool) *ItemSink[T] {
	return &ItemSink[T]{ss: ss, vc: codecOf[T](), caller: caller}
}

// Send sends one item, waiting while the receiver has granted no credit.
// A []byte item is copied, so it may be reused once Send returns. It fails
// once the call has ended (then with how).
func (s *ItemSink[T]) Send(v T) error {
	p, err := s.vc.encode(v, s.ss.Codec())
	if err != nil {
		code := CodeDefect
		if s.caller {
			code = CodeInvalidArgument
		}
		return Errorf(code, "cannot encode item: %v", err)
	}
	if s.vc.kind == rawBytes && len(p.Bytes) > 4096 {
		p.Bytes = append([]byte(nil), p.Bytes...)
	}
	return s.ss.Send(p)
}

// CloseSend ends a caller's inputs (END); the call goes on until the
// callee answers. A handler's outputs end with its answer: there it does
// nothing.
func (s *ItemSink[T]) CloseSend() error { return s.ss.CloseSend() }
