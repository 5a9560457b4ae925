package hubwire

import (
	"context"

	"hubwire.dev/go/internal/engine"
)

// CallContext is what a handler knows about the call it serves: Method,
// ID, Kind, Peer (the caller's HELLO) and the deadline. It is also the
// handler's context.Context, done when the caller cancels, the deadline
// passes, the connection dies or the handler has answered.
type CallContext = engine.CallContext

// CallContextOf returns the CallContext of a handler's ctx (or of a
// context derived from it), or nil outside a handler.
func CallContextOf(ctx context.Context) *CallContext { return engine.FromContext(ctx) }
