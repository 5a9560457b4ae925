package main

import (
	"context"
	"time"

	hubwire "hubwire.dev/go"
)

// The conformance service (conformance/README.md): the methods every
// testee offers in the provider role.

type msArg struct {
	Ms int64 `json:"ms"`
}

// probe reports "cancelled" for the call if its context ends before done
// is closed.
func probe(ctx context.Context, ev *events, done <-chan struct{}) {
	method := hubwire.CallContextOf(ctx).Method
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-done:
			default:
				ev.emit(map[string]any{"event": "cancelled", "method": method})
			}
		case <-done:
		}
	}()
}

func conformanceService(ev *events) *hubwire.Provider {
	return hubwire.NewProvider("conformance").
		Unary("echo", hubwire.UnaryFunc(func(ctx context.Context, b []byte) ([]byte, error) { return b, nil })).
		Unary("echo_value", hubwire.UnaryFunc(func(ctx context.Context, v any) (any, error) { return v, nil })).
		Unary("fail", hubwire.UnaryFunc(func(ctx context.Context, v any) (any, error) { return nil, hubwire.Fail(v) })).
		Unary("panic", hubwire.UnaryFunc(func(ctx context.Context, p hubwire.Payload) (any, error) {
			panic("conformance: the caller asked for a panic")
		})).
		Unary("sleep", hubwire.UnaryFunc(func(ctx context.Context, in msArg) (any, error) {
			done := make(chan struct{})
			defer close(done)
			probe(ctx, ev, done)
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			case <-ctx.Done():
				// Make sure the probe reports before the handler is gone.
				time.Sleep(time.Millisecond)
				return nil, ctx.Err()
			}
			return nil, nil
		})).
		Unary("big", hubwire.UnaryFunc(func(ctx context.Context, n int) ([]byte, error) {
			b := make([]byte, n)
			for i := range b {
				b[i] = 97
			}
			return b, nil
		})).
		ServerStream("count", hubwire.ServerStreamFunc(func(ctx context.Context, n int64, out *hubwire.ItemSink[int64]) error {
			for i := range n {
				if err := out.Send(i); err != nil {
					return err
				}
			}
			return nil
		})).
		ServerStream("fail_after", hubwire.ServerStreamFunc(func(ctx context.Context, n int64, out *hubwire.ItemSink[int64]) error {
			for i := range n {
				if err := out.Send(i); err != nil {
					return err
				}
			}
			return hubwire.Fail(map[string]int64{"after": n})
		})).
		ServerStream("forever", hubwire.ServerStreamFunc(func(ctx context.Context, in msArg, out *hubwire.ItemSink[int64]) error {
			done := make(chan struct{})
			defer close(done)
			probe(ctx, ev, done)
			for i := int64(0); ; i++ {
				if err := out.Send(i); err != nil {
					<-ctx.Done()
					time.Sleep(time.Millisecond)
					return err
				}
				select {
				case <-time.After(time.Duration(max(in.Ms, 1)) * time.Millisecond):
				case <-ctx.Done():
					time.Sleep(time.Millisecond)
					return ctx.Err()
				}
			}
		})).
		ClientStream("sum", hubwire.ClientStreamFunc(func(ctx context.Context, in *hubwire.ItemStream[int64]) (int64, error) {
			var total int64
			for n, err := range in.All() {
				if err != nil {
					return 0, err
				}
				total += n
			}
			return total, nil
		})).
		ClientStream("first", hubwire.ClientStreamFunc(func(ctx context.Context, in *hubwire.ItemStream[any]) (any, error) {
			for v, err := range in.All() {
				return v, err
			}
			return nil, nil
		})).
		Bidi("echo_stream", hubwire.BidiFunc(func(ctx context.Context, in *hubwire.ItemStream[any], out *hubwire.ItemSink[any]) error {
			for v, err := range in.All() {
				if err != nil {
					return err
				}
				if err := out.Send(v); err != nil {
					return err
				}
			}
			return nil
		}))
}
