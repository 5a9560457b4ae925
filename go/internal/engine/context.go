package engine

import (
	"context"
	"sync"
	"time"

	"hubwire.dev/go/frame"
)

// CallContext is what a handler knows about the call it serves, and the
// handler's context.Context: done when the caller cancels, the deadline
// passes, the connection dies, or the handler has answered.
//
// It is one allocation per call: the done channel is made only if someone
// asks for it, and values come from the connection's parent context.
type CallContext struct {
	// Method is the method called.
	Method string
	// ID is the call's id on this connection.
	ID uint32
	// Kind is the kind the caller asked for.
	Kind frame.Kind
	// Peer is the caller's HELLO.
	Peer *frame.Hello

	deadline time.Time
	mu       sync.Mutex
	done     chan struct{}
	err      error
	cause    error
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

type callContextKey struct{}

// FromContext returns the CallContext a handler's ctx carries, or nil.
func FromContext(ctx context.Context) *CallContext {
	c, _ := ctx.Value(callContextKey{}).(*CallContext)
	return c
}

// Deadline is the caller's deadline, if it set one.
func (c *CallContext) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Done is closed when the call is over for the handler.
func (c *CallContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedChan
		}
		c.done = make(chan struct{})
	}
	return c.done
}

// Err is context.Canceled or context.DeadlineExceeded once Done is closed.
func (c *CallContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value returns the CallContext itself for its key, nothing else.
func (c *CallContext) Value(key any) any {
	if key == (callContextKey{}) {
		return c
	}
	return nil
}

// Cause says why the call ended for the handler (context.Cause reads it
// through Value only for the standard types, so this is the way to it).
func (c *CallContext) Cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// IsCancelled reports whether the call is over for the handler.
func (c *CallContext) IsCancelled() bool { return c.Err() != nil }

// cancel ends the context (once); err is context.Canceled or
// context.DeadlineExceeded.
func (c *CallContext) cancel(err, cause error) {
	c.mu.Lock()
	if c.err == nil {
		c.err, c.cause = err, cause
		if c.done != nil {
			close(c.done)
		}
	}
	c.mu.Unlock()
}

// String names the call, for logs.
func (c *CallContext) String() string { return "hubwire call " + c.Method }
