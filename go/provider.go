package hubwire

import (
	"context"
	"fmt"
	"log"
	"slices"

	"hubwire.dev/go/frame"
	"hubwire.dev/go/internal/engine"
	"hubwire.dev/go/transport"
)

// Provider is a set of methods under a name: register handlers by name,
// then serve them to a parent (ServeChild), on a listener (Serve) or on
// one transport (ServeTransport). A Provider is a Service: the engine
// hands it each call, and it finds the handler, decodes the input and
// encodes the output. Each call's handler runs in its own goroutine.
//
// Register every method before serving; a Provider is not changed after.
type Provider struct {
	name    string
	methods map[string]*method
	order   []string
}

type method struct {
	info frame.MethodInfo
	h    handler
}

// NewProvider returns an empty provider called name.
func NewProvider(name string) *Provider {
	return &Provider{name: name, methods: map[string]*method{}}
}

// Name is the provider's name.
func (p *Provider) Name() string { return p.name }

func (p *Provider) add(name string, h handler) *Provider {
	if len(name) == 0 || len(name) > 255 {
		panic(fmt.Sprintf("hubwire: method name must be 1-255 bytes: %q", name))
	}
	if _, dup := p.methods[name]; !dup {
		p.order = append(p.order, name)
	}
	p.methods[name] = &method{info: frame.MethodInfo{Name: name, Kind: h.kind, Input: h.input, Output: h.output}, h: h}
	return p
}

// Unary registers a unary method (see UnaryFunc).
func (p *Provider) Unary(name string, h UnaryHandler) *Provider { return p.add(name, h.h) }

// ServerStream registers a server-streaming method (see ServerStreamFunc).
func (p *Provider) ServerStream(name string, h ServerStreamHandler) *Provider {
	return p.add(name, h.h)
}

// ClientStream registers a client-streaming method (see ClientStreamFunc).
func (p *Provider) ClientStream(name string, h ClientStreamHandler) *Provider {
	return p.add(name, h.h)
}

// Bidi registers a bidirectional method (see BidiFunc).
func (p *Provider) Bidi(name string, h BidiHandler) *Provider { return p.add(name, h.h) }

func (p *Provider) method(name string) *method {
	m, ok := p.methods[name]
	if !ok {
		panic(fmt.Sprintf("hubwire: no method %q", name))
	}
	return m
}

// Describe sets the JSON Schemas a method advertises in HELLO: its input,
// its output, and the type of its failures (nil: none declared).
func (p *Provider) Describe(name string, input, output, failures any) *Provider {
	m := p.method(name)
	m.info.Input, m.info.Output, m.info.Errors = input, output, failures
	return p
}

// Doc sets a method's one-line description, advertised in HELLO.
func (p *Provider) Doc(name, text string) *Provider {
	p.method(name).info.Doc = text
	return p
}

// Methods lists the methods in the order they were registered (Service).
func (p *Provider) Methods() []MethodInfo {
	out := make([]MethodInfo, 0, len(p.order))
	for _, n := range p.order {
		out = append(out, p.methods[n].info)
	}
	return out
}

// Call serves one call (Service): an unknown method is unknown_method, a
// kind that is not the method's is invalid_argument.
func (p *Provider) Call(ctx context.Context, call *Incoming) (Payload, error) {
	m, ok := p.methods[call.Method]
	if !ok {
		return Payload{}, Errorf(CodeUnknownMethod, "unknown method %q; offered: %q", call.Method, p.order)
	}
	if m.info.Kind != call.Kind {
		return Payload{}, Errorf(CodeInvalidArgument, "method %q is %s, called as %s", call.Method, m.info.Kind, call.Kind)
	}
	return m.h.serve(ctx, call)
}

func (p *Provider) options(opts []ConnectionOptions) ConnectionOptions {
	o := options(opts)
	if o.Name == "" {
		o.Name = p.name
	}
	o.Service = p
	return o
}

// ServeTransport serves these methods on one transport, as the acceptor,
// and returns the connection once its handshake is done.
func (p *Provider) ServeTransport(t transport.Transport, opts ...ConnectionOptions) (*Connection, error) {
	return Accept(t, p.options(opts))
}

// Serve accepts connections on l until it is closed, serving these
// methods on each. A connection whose handshake fails is logged and
// dropped; the others go on.
func (p *Provider) Serve(l transport.Listener, opts ...ConnectionOptions) error {
	o := p.options(opts)
	for {
		t, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			if _, err := Accept(t, o); err != nil {
				log.Printf("hubwire: %s: handshake with %s failed: %v", p.name, t, err)
			}
		}()
	}
}

// ServeChild serves these methods to the parent that started this
// process (spec/PROTOCOL.md §10: the socket on HUBWIRE_FD) until the
// parent goes away, then returns nil. It fails at once if HUBWIRE_FD is
// not set. Stdout and stderr stay free for logs: the parent turns them
// into log lines.
func (p *Provider) ServeChild(opts ...ConnectionOptions) error {
	t, err := transport.FromEnv()
	if err != nil {
		return Errorf(CodeUnavailable, "cannot serve the parent: %v", err)
	}
	c, err := p.ServeTransport(t, opts...)
	if err != nil {
		return err
	}
	<-c.Done()
	return nil
}

// Has reports whether the provider has a method called name.
func (p *Provider) Has(name string) bool { return slices.Contains(p.order, name) }

var _ engine.Service = (*Provider)(nil)
