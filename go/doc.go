// Package hubwire is the Go SDK of hubwire: one wire protocol
// (spec/PROTOCOL.md) between a hub, its clients and its providers, over a
// child process's socketpair, a Unix socket, TCP or memory.
//
// A provider is a few lines:
//
//	provider := hubwire.NewProvider("greeter").
//		Unary("greet", hubwire.UnaryFunc(func(ctx context.Context, name string) (string, error) {
//			return "hello, " + name, nil
//		}))
//	err := provider.ServeChild() // started by the hub: serve it on descriptor 3
//
// and a call is one line:
//
//	greeting, err := hubwire.Call[string](ctx, conn, "greet", "gopher")
//
// The package is layered like the Rust runtime (ARCHITECTURE.md):
//
//	hubwire (this package)  Connection, Call…, Provider, ItemStream/ItemSink, Failure
//	──────── Service ───────  the one seam: Methods(), Call(ctx, *Incoming)
//	internal/engine         handshake, reader, writer, call table, credit, deadlines, wait modes
//	frame                   the pure frame codec and the status codes
//	transport               memory, child (fd 3), Unix, TCP: bytes only
//
// Contexts carry deadlines and cancellation both ways: a caller's ctx
// deadline becomes the call's deadline on the wire, cancelling ctx sends
// CANCEL, and a handler's ctx is done when the caller cancels, the
// deadline passes or the connection dies.
//
// Payloads: a []byte input or output travels raw, with no encoding; any
// other Go value travels as MessagePack (the default) or JSON, encoded
// with the `json` struct tags in both codecs.
package hubwire
