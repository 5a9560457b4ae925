package hubwire

import (
	"context"
	"time"

	"hubwire.dev/go/internal/engine"
	"hubwire.dev/go/transport"
)

// ConnectionOptions say how a connection presents itself (Name), its
// limits (MaxFrame, Window, MaxCalls, HandshakeTimeout), how its reader
// waits (Wait, Spin) and what it serves (Service, usually a *Provider).
// Every zero field takes its default.
type ConnectionOptions = engine.Options

// Service is the serving seam: whatever serves the calls that arrive on a
// connection. A *Provider is one; a relay is another.
type Service = engine.Service

// Incoming is one call as the engine hands it to a Service.
type Incoming = engine.Incoming

// Connection is a live connection to a peer: many calls at once, either
// side may call. It is safe for concurrent use.
type Connection struct {
	core *engine.Core
}

func options(opts []ConnectionOptions) ConnectionOptions {
	if len(opts) > 0 {
		return opts[0]
	}
	return ConnectionOptions{}
}

// Dial opens a connection over t as the dialer (the side that opened the
// transport: a client, the hub). It returns once both HELLOs are
// exchanged; t is closed if that fails.
func Dial(t transport.Transport, opts ...ConnectionOptions) (*Connection, error) {
	core, err := engine.Open(t, options(opts), true)
	if err != nil {
		return nil, err
	}
	return &Connection{core}, nil
}

// Accept opens a connection over t as the acceptor (the side that was
// dialled: a provider, a child).
func Accept(t transport.Transport, opts ...ConnectionOptions) (*Connection, error) {
	core, err := engine.Open(t, options(opts), false)
	if err != nil {
		return nil, err
	}
	return &Connection{core}, nil
}

// DialUnix dials a Unix socket and opens a connection on it.
func DialUnix(path string, opts ...ConnectionOptions) (*Connection, error) {
	t, err := transport.DialUnix(path)
	if err != nil {
		return nil, Errorf(CodeUnavailable, "dial unix:%s: %v", path, err)
	}
	return Dial(t, opts...)
}

// DialTCP dials a TCP address and opens a connection on it.
func DialTCP(addr string, opts ...ConnectionOptions) (*Connection, error) {
	t, err := transport.DialTCP(addr)
	if err != nil {
		return nil, Errorf(CodeUnavailable, "dial tcp:%s: %v", addr, err)
	}
	return Dial(t, opts...)
}

// Peer is the peer's HELLO: its name, language, limits and methods.
func (c *Connection) Peer() *Hello { return c.core.Peer() }

// Ping sends a PING and returns the round trip to its PONG.
func (c *Connection) Ping(ctx context.Context) (time.Duration, error) { return c.core.Ping(ctx) }

// Close ends the connection now: calls in flight either way fail with
// unavailable. It returns nil.
func (c *Connection) Close() error {
	c.core.Close()
	return nil
}

// Drain sends GOAWAY (the peer starts no new calls), refuses new calls,
// lets the calls in flight either way finish until ctx ends, then closes.
func (c *Connection) Drain(ctx context.Context) error {
	c.core.Drain(ctx)
	return nil
}

// Done is closed when the connection has ended.
func (c *Connection) Done() <-chan struct{} { return c.core.Done() }

// Err says why the connection ended (an *Error with CodeUnavailable), or
// nil while it is open.
func (c *Connection) Err() error {
	if e := c.core.Err(); e != nil {
		return e
	}
	return nil
}

// String describes the connection's transport.
func (c *Connection) String() string { return c.core.Transport().String() }
