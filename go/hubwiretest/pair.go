// Package hubwiretest helps test providers and services: a client
// connected to a service in memory, in one line.
package hubwiretest

import (
	"fmt"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/transport"
)

// Conns are the two ends of one in-memory connection.
type Conns struct {
	// Client is the dialer, calling the service.
	Client *hubwire.Connection
	// Server is the acceptor, serving it (close or drain it to test the
	// serving side going away).
	Server *hubwire.Connection
}

// Close closes both ends.
func (c *Conns) Close() {
	c.Client.Close()
	c.Server.Close()
}

// Pair connects a client to service over an in-memory transport, both
// sides with default options (named "client" and "server"). It panics if
// the handshake fails, which in memory means options the other side
// refuses: a test should stop there.
func Pair(service hubwire.Service) *Conns {
	return PairWith(service, hubwire.ConnectionOptions{Name: "client"}, hubwire.ConnectionOptions{Name: "server"})
}

// PairWith is Pair with options for each side (server.Service is set to
// service).
func PairWith(service hubwire.Service, client, server hubwire.ConnectionOptions) *Conns {
	a, b := transport.Pair()
	server.Service = service
	type result struct {
		c   *hubwire.Connection
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := hubwire.Accept(b, server)
		done <- result{s, err}
	}()
	c, err := hubwire.Dial(a, client)
	s := <-done
	if err != nil || s.err != nil {
		panic(fmt.Sprintf("hubwiretest: handshake failed: client %v, server %v", err, s.err))
	}
	return &Conns{Client: c, Server: s.c}
}
