package hubwire_test

import (
	"context"
	"testing"
	"time"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/hubwiretest"
)

// A unary call that arrives alone runs on the reader goroutine; if its
// handler blocks, another goroutine takes over reading, so the next call,
// and a CANCEL for the blocked one, still get through. Here the first
// handler blocks until the second call has been answered: without the
// takeover the second call would never be read, and the test would hang.
func TestABlockingInlineHandlerDoesNotStopTheConnection(t *testing.T) {
	for _, wait := range []hubwire.WaitMode{hubwire.WaitEfficient, hubwire.WaitLowLatency} {
		t.Run(wait.String(), func(t *testing.T) {
			release := make(chan struct{})
			cancelled := make(chan struct{})
			p := hubwire.NewProvider("inline").
				Unary("block", hubwire.UnaryFunc(func(ctx context.Context, _ int) (int, error) {
					<-release
					return 1, nil
				})).
				Unary("wait", hubwire.UnaryFunc(func(ctx context.Context, _ int) (int, error) {
					<-ctx.Done()
					close(cancelled)
					return 0, ctx.Err()
				})).
				Unary("add", hubwire.UnaryFunc(func(ctx context.Context, in [2]int) (int, error) { return in[0] + in[1], nil }))
			conns := hubwiretest.PairWith(p, hubwire.ConnectionOptions{Wait: wait}, hubwire.ConnectionOptions{Wait: wait})
			defer conns.Close()

			first := make(chan error, 1)
			go func() {
				v, err := hubwire.Call[int](bg, conns.Client, "block", 0)
				if err == nil && v != 1 {
					err = hubwire.Errorf(hubwire.CodeInternal, "block answered %d", v)
				}
				first <- err
			}()
			time.Sleep(10 * time.Millisecond)                      // "block" arrives alone and starts on the reader
			guard, stop := context.WithTimeout(bg, 10*time.Second) // a hang fails, not waits
			defer stop()
			if v, err := hubwire.Call[int](guard, conns.Client, "add", [2]int{2, 3}); v != 5 || err != nil {
				t.Fatalf("a call behind a blocked handler: %v %v", v, err)
			}
			close(release)
			if err := <-first; err != nil {
				t.Fatal(err)
			}

			// And a CANCEL reaches a blocked handler.
			ctx, cancel := context.WithCancel(bg)
			done := make(chan error, 1)
			go func() {
				_, err := hubwire.Call[int](ctx, conns.Client, "wait", 0)
				done <- err
			}()
			time.Sleep(10 * time.Millisecond)
			cancel()
			expectCode(t, <-done, hubwire.CodeCancelled)
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the blocked handler never saw its cancellation")
			}
		})
	}
}
