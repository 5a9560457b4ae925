// Package behaviour is the provider every case of the behaviour suite
// (behaviour_test.go in the hubwire package) calls, the Go twin of
// rust/hubwire-tests: the same provider runs in-process (memory, Unix,
// TCP) and as a child process, so a case cannot tell which transport it
// runs on.
package behaviour

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	hubwire "hubwire.dev/go"
)

// DivError is the typed failure of divide and then_fail.
type DivError struct {
	Kind string `json:"kind"`
}

// Tagged is the input of the methods that record what happened to them
// under a token.
type Tagged struct {
	Token string `json:"token"`
	N     int64  `json:"n"`
}

// The provider's limits: a small window, so flow control shows.
const (
	Window   = 16
	MaxFrame = 4 << 20
)

// Options are the provider's connection settings.
func Options(wait hubwire.WaitMode) hubwire.ConnectionOptions {
	return hubwire.ConnectionOptions{Name: "behaviour", Window: Window, MaxFrame: MaxFrame, Wait: wait}
}

// What the provider observed, per token.
var observed struct {
	sync.Mutex
	sent      map[string]int64
	cancelled map[string]bool
}

func observe(f func()) {
	observed.Lock()
	defer observed.Unlock()
	if observed.sent == nil {
		observed.sent, observed.cancelled = map[string]int64{}, map[string]bool{}
	}
	f()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Provider is the provider every behaviour case calls.
func Provider() *hubwire.Provider {
	return hubwire.NewProvider("behaviour").
		Unary("echo", hubwire.UnaryFunc(func(ctx context.Context, b []byte) ([]byte, error) { return b, nil })).
		Unary("add", hubwire.UnaryFunc(func(ctx context.Context, in [2]int64) (int64, error) { return in[0] + in[1], nil })).
		Unary("divide", hubwire.UnaryFunc(func(ctx context.Context, in [2]float64) (float64, error) {
			if in[1] == 0 {
				return 0, hubwire.Fail(DivError{Kind: "division_by_zero"})
			}
			return in[0] / in[1], nil
		})).
		Unary("panic", hubwire.UnaryFunc(func(ctx context.Context, msg string) (any, error) {
			if msg != "" {
				panic(msg)
			}
			return nil, nil
		})).
		Unary("sleep", hubwire.UnaryFunc(func(ctx context.Context, t Tagged) (any, error) {
			cancelled := true
			observe(func() { observed.cancelled[t.Token] = false })
			defer func() { observe(func() { observed.cancelled[t.Token] = cancelled }) }()
			if err := sleep(ctx, time.Duration(t.N)*time.Millisecond); err != nil {
				return nil, err
			}
			cancelled = false
			return nil, nil
		})).
		Unary("was_cancelled", hubwire.UnaryFunc(func(ctx context.Context, token string) (*bool, error) {
			var v *bool
			observe(func() {
				if c, ok := observed.cancelled[token]; ok {
					v = &c
				}
			})
			return v, nil
		})).
		Unary("progress", hubwire.UnaryFunc(func(ctx context.Context, token string) (int64, error) {
			var v int64
			observe(func() { v = observed.sent[token] })
			return v, nil
		})).
		Unary("delay_echo", hubwire.UnaryFunc(func(ctx context.Context, in [2]int64) (int64, error) {
			return in[0], sleep(ctx, time.Duration(in[1])*time.Millisecond)
		})).
		Unary("shout", hubwire.UnaryFunc(func(ctx context.Context, line string) (string, error) {
			// Noise on stdout and stderr: must never reach the protocol.
			fmt.Printf("\x01\x02HW garbage %s \x0c\x01\x00\x00\x00\n", line)
			fmt.Fprintf(os.Stderr, "stderr noise %s\n", line)
			return strings.ToUpper(line), nil
		})).
		ServerStream("count", hubwire.ServerStreamFunc(func(ctx context.Context, n int64, out *hubwire.ItemSink[int64]) error {
			for i := range n {
				if err := out.Send(i); err != nil {
					return err
				}
			}
			return nil
		})).
		ServerStream("firehose", hubwire.ServerStreamFunc(func(ctx context.Context, t Tagged, out *hubwire.ItemSink[int64]) error {
			cancelled := true
			observe(func() { observed.cancelled[t.Token] = false })
			defer func() { observe(func() { observed.cancelled[t.Token] = cancelled }) }()
			for i := range t.N {
				if err := out.Send(i); err != nil {
					return err
				}
				observe(func() { observed.sent[t.Token] = i + 1 })
			}
			cancelled = false
			return nil
		})).
		ServerStream("then_fail", hubwire.ServerStreamFunc(func(ctx context.Context, n int64, out *hubwire.ItemSink[int64]) error {
			for i := range n {
				if err := out.Send(i); err != nil {
					return err
				}
			}
			return hubwire.Fail(DivError{Kind: "stream_failed"})
		})).
		ServerStream("slow_stream", hubwire.ServerStreamFunc(func(ctx context.Context, t Tagged, out *hubwire.ItemSink[int64]) error {
			observe(func() { observed.cancelled[t.Token] = false })
			defer observe(func() { observed.cancelled[t.Token] = true }) // it only ends by cancellation
			for i := int64(0); ; i++ {
				if err := out.Send(i); err != nil {
					return err
				}
				if err := sleep(ctx, time.Duration(t.N)*time.Millisecond); err != nil {
					return err
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
		ClientStream("stall", hubwire.ClientStreamFunc(func(ctx context.Context, in *hubwire.ItemStream[int64]) (int64, error) {
			// Holds the stream open without reading it.
			return 0, sleep(ctx, 30*time.Second)
		})).
		ClientStream("first_only", hubwire.ClientStreamFunc(func(ctx context.Context, in *hubwire.ItemStream[int64]) (int64, error) {
			// Answers after one item without reading the rest: a callee may
			// end a call before the caller's END.
			v, err := in.Recv()
			if err != nil {
				return -1, nil
			}
			return v, nil
		})).
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
}
