package hubwire_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/hubwiretest"
)

// A provider in a few lines, called over an in-memory pair.
func Example() {
	provider := hubwire.NewProvider("greeter").
		Unary("greet", hubwire.UnaryFunc(func(ctx context.Context, name string) (string, error) {
			return "hello, " + name, nil
		}))
	conns := hubwiretest.Pair(provider)
	defer conns.Close()

	greeting, err := hubwire.Call[string](context.Background(), conns.Client, "greet", "gopher")
	fmt.Println(greeting, err)
	// Output: hello, gopher <nil>
}

type DivError struct {
	Kind string `json:"kind"`
}

// A declared failure is a typed value the caller takes out with errors.As.
func ExampleFailure() {
	provider := hubwire.NewProvider("calc").
		Unary("divide", hubwire.UnaryFunc(func(ctx context.Context, in [2]float64) (float64, error) {
			if in[1] == 0 {
				return 0, hubwire.Fail(DivError{Kind: "division_by_zero"})
			}
			return in[0] / in[1], nil
		}))
	conns := hubwiretest.Pair(provider)
	defer conns.Close()

	_, err := hubwire.Call[float64](context.Background(), conns.Client, "divide", [2]float64{1, 0})
	var f *hubwire.Failure[DivError]
	if errors.As(err, &f) {
		fmt.Println("failed:", f.Value.Kind, hubwire.CodeOf(err))
	}
	// Output: failed: division_by_zero failure
}

// Streams are iterators: a server stream ranged with All.
func ExampleServerStream() {
	provider := hubwire.NewProvider("counter").
		ServerStream("count", hubwire.ServerStreamFunc(func(ctx context.Context, n int, out *hubwire.ItemSink[int]) error {
			for i := range n {
				if err := out.Send(i); err != nil {
					return err
				}
			}
			return nil
		}))
	conns := hubwiretest.Pair(provider)
	defer conns.Close()

	items, err := hubwire.ServerStream[int](context.Background(), conns.Client, "count", 3)
	if err != nil {
		panic(err)
	}
	for n, err := range items.All() {
		fmt.Println(n, err)
	}
	// Output:
	// 0 <nil>
	// 1 <nil>
	// 2 <nil>
}

// A bidirectional stream: send with the sink, receive with Recv.
func ExampleBidi() {
	provider := hubwire.NewProvider("shout").
		Bidi("upper", hubwire.BidiFunc(func(ctx context.Context, in *hubwire.ItemStream[string], out *hubwire.ItemSink[string]) error {
			for s, err := range in.All() {
				if err != nil {
					return err
				}
				if err := out.Send(strings.ToUpper(s)); err != nil {
					return err
				}
			}
			return nil
		}))
	conns := hubwiretest.Pair(provider)
	defer conns.Close()

	sink, items, err := hubwire.Bidi[string, string](context.Background(), conns.Client, "upper")
	if err != nil {
		panic(err)
	}
	sink.Send("hello")
	sink.Send("hub")
	sink.CloseSend()
	for {
		s, err := items.Recv()
		if err == io.EOF {
			break
		}
		fmt.Println(s)
	}
	// Output:
	// HELLO
	// HUB
}

// A client stream: send the inputs, then Finish for the one answer.
func ExampleClientStream() {
	provider := hubwire.NewProvider("sum").
		ClientStream("sum", hubwire.ClientStreamFunc(func(ctx context.Context, in *hubwire.ItemStream[int]) (int, error) {
			total := 0
			for n, err := range in.All() {
				if err != nil {
					return 0, err
				}
				total += n
			}
			return total, nil
		}))
	conns := hubwiretest.Pair(provider)
	defer conns.Close()

	call, err := hubwire.ClientStream[int, int](context.Background(), conns.Client, "sum")
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 100; i++ {
		call.Send(i)
	}
	fmt.Println(call.Finish())
	// Output: 5050 <nil>
}

// Raw bytes travel with no encoding at all.
func ExampleConnection_CallRaw() {
	provider := hubwire.NewProvider("echo").
		Unary("echo", hubwire.UnaryFunc(func(ctx context.Context, b []byte) ([]byte, error) { return b, nil }))
	conns := hubwiretest.Pair(provider)
	defer conns.Close()

	out, err := conns.Client.CallRaw(context.Background(), "echo", []byte("bytes"))
	fmt.Printf("%s %v\n", out, err)
	// Output: bytes <nil>
}
