package hubwire

import (
	"context"

	"hubwire.dev/go/internal/engine"
)

// Calling a peer's methods: Call (unary, typed), CallRaw (bytes in and
// out, no encoding), ServerStream, ClientStream and Bidi. Type arguments
// put the output first, so the input's type is inferred:
//
//	sum, err := hubwire.Call[int](ctx, conn, "add", []int{2, 3})
//
// ctx's deadline is sent with the call and enforced here too; ending ctx
// (or abandoning a stream) sends CANCEL.

// CallOptions are the settings of one call besides its context.
type CallOptions struct {
	// Codec is the codec of structured payloads (MessagePack unless set).
	Codec Codec
}

// CallOption sets a CallOptions field.
type CallOption func(*CallOptions)

// WithCodec sends structured payloads as codec (CodecMsgpack or CodecJSON).
func WithCodec(codec Codec) CallOption { return func(o *CallOptions) { o.Codec = codec } }

func callOptions(opts []CallOption) CallOptions {
	o := CallOptions{Codec: CodecMsgpack}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func encodeInput[In any](in In, codec Codec) (Payload, error) {
	p, err := codecOf[In]().encode(in, codec)
	if err != nil {
		return p, Errorf(CodeInvalidArgument, "cannot encode input: %v", err)
	}
	return p, nil
}

func decodeOutput[Out any](p Payload) (Out, error) {
	v, err := codecOf[Out]().decode(p)
	if err != nil {
		return v, Errorf(CodeInternal, "cannot decode the response: %v", err)
	}
	return v, nil
}

// Call makes a unary call: one input, one output, typed. A failure the
// method declares comes back as an *Error with CodeFailure, from which
// errors.As takes a *Failure[T].
func Call[Out, In any](ctx context.Context, c *Connection, method string, in In, opts ...CallOption) (Out, error) {
	var zero Out
	o := callOptions(opts)
	p, err := encodeInput(in, o.Codec)
	if err != nil {
		return zero, err
	}
	out, err := c.core.Unary(ctx, method, p)
	if err != nil {
		return zero, err
	}
	return decodeOutput[Out](out)
}

// CallRaw makes a unary call with raw bytes in and out: no serialization
// at all, the fast path. in must not be changed until CallRaw returns.
func (c *Connection) CallRaw(ctx context.Context, method string, in []byte) ([]byte, error) {
	out, err := c.core.Unary(ctx, method, Payload{Codec: CodecRaw, Bytes: in})
	return out.Bytes, err
}

// CallPayload makes a unary call with a payload as it travels, for relays
// that do not decode.
func (c *Connection) CallPayload(ctx context.Context, method string, in Payload) (Payload, error) {
	return c.core.Unary(ctx, method, in)
}

// ServerStream calls a server-streaming method: one input, a stream of
// outputs. Read it to the end with Recv or All; Close abandons it.
func ServerStream[Out, In any](ctx context.Context, c *Connection, method string, in In, opts ...CallOption) (*ItemStream[Out], error) {
	o := callOptions(opts)
	p, err := encodeInput(in, o.Codec)
	if err != nil {
		return nil, err
	}
	s, err := c.core.Start(ctx, method, KindServerStream, p)
	if err != nil {
		return nil, err
	}
	return newItemStream[Out](s.Recv, CodeInternal, s), nil
}

// ClientStream calls a client-streaming method: Send inputs, then Finish
// for the one output.
func ClientStream[Out, In any](ctx context.Context, c *Connection, method string, opts ...CallOption) (*ClientStreamCall[Out, In], error) {
	o := callOptions(opts)
	s, err := c.core.Start(ctx, method, KindClientStream, Payload{Codec: codecOf[In]().wire(o.Codec)})
	if err != nil {
		return nil, err
	}
	return &ClientStreamCall[Out, In]{sink: newItemSink[In](s.Send, true), s: s}, nil
}

// Bidi calls a bidirectional method: a sink for the inputs (CloseSend when
// done) and a stream of outputs.
func Bidi[Out, In any](ctx context.Context, c *Connection, method string, opts ...CallOption) (*ItemSink[In], *ItemStream[Out], error) {
	o := callOptions(opts)
	s, err := c.core.Start(ctx, method, KindBidi, Payload{Codec: codecOf[In]().wire(o.Codec)})
	if err != nil {
		return nil, nil, err
	}
	return newItemSink[In](s.Send, true), newItemStream[Out](s.Recv, CodeInternal, s), nil
}

// ClientStreamCall is a client stream in progress: Send the inputs, then
// Finish (END, then the answer), or Response for a method that answers
// before the inputs end.
type ClientStreamCall[Out, In any] struct {
	sink *ItemSink[In]
	s    *engine.Streams
}

// Send sends one input, waiting for credit. It fails once the call has
// ended, which includes the callee answering early: Response then says
// how it ended.
func (c *ClientStreamCall[Out, In]) Send(v In) error { return c.sink.Send(v) }

// Finish ends the inputs (END) and waits for the output.
func (c *ClientStreamCall[Out, In]) Finish() (Out, error) {
	c.sink.CloseSend()
	return c.Response()
}

// Response waits for the output without ending the inputs.
func (c *ClientStreamCall[Out, In]) Response() (Out, error) {
	p, err := c.s.Response()
	if err != nil {
		var zero Out
		return zero, err
	}
	return decodeOutput[Out](p)
}

// Close abandons the call if it is still going (CANCEL).
func (c *ClientStreamCall[Out, In]) Close() { c.s.Abandon() }
