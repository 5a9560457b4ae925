package hubwire

import (
	"context"

	"hubwire.dev/go/internal/engine"
)

// Handlers, typed with generics. Each constructor takes a plain function
// and infers its types; the Provider method of the same kind registers
// it:
//
//	p.Unary("add", hubwire.UnaryFunc(func(ctx context.Context, in [2]int) (int, error) { return in[0] + in[1], nil }))
//
// A handler returns Fail(value) for a failure its method declares; any
// other error is a defect unless it is an *Error (whose code is kept), and
// a panic is a defect for that call only. A handler's outputs travel in
// the request's codec.

// handler is a typed handler erased to the engine's terms.
type handler struct {
	kind   Kind
	input  any // JSON Schemas for HELLO
	output any
	serve  func(ctx context.Context, call *engine.Incoming) (Payload, error)
}

// UnaryHandler is a unary method's handler, made by UnaryFunc.
type UnaryHandler struct{ h handler }

// ServerStreamHandler is a server-streaming method's handler, made by
// ServerStreamFunc.
type ServerStreamHandler struct{ h handler }

// ClientStreamHandler is a client-streaming method's handler, made by
// ClientStreamFunc.
type ClientStreamHandler struct{ h handler }

// BidiHandler is a bidirectional method's handler, made by BidiFunc.
type BidiHandler struct{ h handler }

func decodeInput[In any](method string, p Payload) (In, error) {
	v, err := codecOf[In]().decode(p)
	if err != nil {
		return v, Errorf(CodeInvalidArgument, "%s: cannot decode input: %v", method, err)
	}
	return v, nil
}

func encodeOutput[Out any](out Out, wanted Codec) (Payload, error) {
	p, err := codecOf[Out]().encode(out, wanted)
	if err != nil {
		return p, Errorf(CodeDefect, "output could not be encoded: %v", err)
	}
	return p, nil
}

// UnaryFunc makes a unary handler: one input, one output.
func UnaryFunc[In, Out any](fn func(ctx context.Context, in In) (Out, error)) UnaryHandler {
	return UnaryHandler{handler{KindUnary, codecOf[In]().schema(), codecOf[Out]().schema(),
		func(ctx context.Context, call *engine.Incoming) (Payload, error) {
			wanted := call.Input.Codec
			in, err := decodeInput[In](call.Method, call.Input)
			if err != nil {
				return Payload{}, err
			}
			out, err := fn(ctx, in)
			if err != nil {
				return Payload{}, handlerError(err, wanted)
			}
			return encodeOutput(out, wanted)
		}}}
}

// ServerStreamFunc makes a server-streaming handler: one input, and a sink
// for the outputs; returning nil ends the stream.
func ServerStreamFunc[In, Out any](fn func(ctx context.Context, in In, out *ItemSink[Out]) error) ServerStreamHandler {
	return ServerStreamHandler{handler{KindServerStream, codecOf[In]().schema(), codecOf[Out]().schema(),
		func(ctx context.Context, call *engine.Incoming) (Payload, error) {
			wanted := call.Input.Codec
			in, err := decodeInput[In](call.Method, call.Input)
			if err != nil {
				return Payload{}, err
			}
			if err := fn(ctx, in, newItemSink[Out](call.Sink, false)); err != nil {
				return Payload{}, handlerError(err, wanted)
			}
			return Payload{}, nil
		}}}
}

// ClientStreamFunc makes a client-streaming handler: a stream of inputs,
// one output. It may answer before reading every input.
func ClientStreamFunc[In, Out any](fn func(ctx context.Context, in *ItemStream[In]) (Out, error)) ClientStreamHandler {
	return ClientStreamHandler{handler{KindClientStream, codecOf[In]().schema(), codecOf[Out]().schema(),
		func(ctx context.Context, call *engine.Incoming) (Payload, error) {
			wanted := call.Input.Codec
			out, err := fn(ctx, newItemStream[In](call.Items, CodeInvalidArgument, nil))
			if err != nil {
				return Payload{}, handlerError(err, wanted)
			}
			return encodeOutput(out, wanted)
		}}}
}

// BidiFunc makes a bidirectional handler: a stream of inputs and a sink
// for the outputs.
func BidiFunc[In, Out any](fn func(ctx context.Context, in *ItemStream[In], out *ItemSink[Out]) error) BidiHandler {
	return BidiHandler{handler{KindBidi, codecOf[In]().schema(), codecOf[Out]().schema(),
		func(ctx context.Context, call *engine.Incoming) (Payload, error) {
			wanted := call.Input.Codec
			err := fn(ctx, newItemStream[In](call.Items, CodeInvalidArgument, nil), newItemSink[Out](call.Sink, false))
			if err != nil {
				return Payload{}, handlerError(err, wanted)
			}
			return Payload{}, nil
		}}}
}
