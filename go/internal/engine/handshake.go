package engine

import (
	"errors"
	"io"
	"time"

	"hubwire.dev/go/frame"
	"hubwire.dev/go/transport"
)

// Opening a connection (spec/PROTOCOL.md §4): both sides send HELLO at
// once, read the peer's and negotiate the version; then the connection's
// one reader goroutine starts. A handshake that fails for anything but a
// lost peer is refused with GOAWAY and its code, so the peer learns why.
//
// An acceptor that requires a token (§4.4) reads the dialer's HELLO first
// and sends its own only once the token matches: its HELLO lists its
// methods, which a peer without the token must not learn.

// Open opens a connection over t as the dialer (odd call ids) or the
// acceptor (even ids) and starts its reader. On failure t is closed.
func Open(t transport.Transport, o Options, dialer bool) (*Core, error) {
	o = o.withDefaults()
	local := o.hello(dialer)
	w := newWriter(t, o.WriteQueue)
	gated := !dialer && o.RequireToken != ""
	sendHello := func() error {
		if err := w.push((&frame.Frame{Type: frame.TypeHello, Hello: local}).Append(nil), nil, false); err != nil {
			t.Close()
			return unavailable("cannot send HELLO: %v", err)
		}
		return nil
	}
	if !gated {
		if err := sendHello(); err != nil {
			return nil, err
		}
	}
	// The HELLO may be larger than our max_frame: the peer cannot know our
	// limit before sending it (§4.1.2).
	dec := frame.NewDecoder(max(o.MaxFrame, frame.HelloLimit))
	rb := &readBuf{}
	f, ferr := readHello(t, dec, rb, o.HandshakeTimeout)
	refuse := func(e *frame.Error) (*Core, error) {
		if e.Code != frame.Unavailable {
			w.push(frame.AppendGoaway(nil, 0, e.Code, e.Message), nil, false)
			w.flushed(100 * time.Millisecond)
			w.close(e.Message)
			// The refusal lingers before it closes (§7.3), in the
			// background: the error is the caller's at once.
			go linger(t)
			return nil, fromFrame(e)
		}
		w.close(e.Message)
		t.Close()
		return nil, fromFrame(e)
	}
	if ferr != nil {
		return refuse(ferr)
	}
	switch f.Type {
	case frame.TypeHello:
	case frame.TypeGoaway:
		w.close("refused")
		t.Close()
		return nil, Errorf(f.Code, "peer refused the handshake: %s", f.Message)
	default:
		return refuse(&frame.Error{Code: frame.ProtocolError, Message: "expected HELLO as the first frame, got " + f.Type.String()})
	}
	if gated {
		// Never echo the token.
		switch {
		case f.Hello.Token == "":
			return refuse(&frame.Error{Code: frame.Unauthenticated, Message: "token required"})
		case !frame.TokenMatches(f.Hello.Token, o.RequireToken):
			return refuse(&frame.Error{Code: frame.Unauthenticated, Message: "wrong token"})
		}
		if err := sendHello(); err != nil {
			return nil, err
		}
	}
	version, ferr := frame.Negotiate(local.Versions, f.Hello.Versions)
	if ferr != nil {
		return refuse(ferr)
	}
	dec.SetVersion(uint8(version))
	dec.SetMaxFrame(o.MaxFrame)
	c := &Core{
		t: t, writer: w, service: o.Service, local: local, peer: f.Hello, dialer: dialer, wait: o.Wait,
		calls: newCallTable(dialer), idle: make(chan struct{}), dead: make(chan struct{}),
		gate: make(chan struct{}, f.Hello.MaxCalls), names: map[string]string{},
	}
	for _, m := range local.Methods {
		c.names[m.Name] = m.Name
	}
	c.rb, c.dec, c.spin, c.stall = rb, dec, o.Spin, o.WriteStallTimeout
	sp := newSpinner(o.Wait, o.Spin)
	c.spinUnary = sp.enabled()
	go c.readLoop(sp)
	return c, nil
}

// readHello reads the first frame, within timeout.
func readHello(t transport.Transport, dec *frame.Decoder, rb *readBuf, timeout time.Duration) (frame.Frame, *frame.Error) {
	timedOut := make(chan struct{})
	timer := time.AfterFunc(timeout, func() { close(timedOut); t.Close() })
	defer timer.Stop()
	for {
		f, n, err := dec.Decode(rb.unread())
		if err != nil {
			return f, err
		}
		if n > 0 {
			rb.r += n
			return f, nil
		}
		need, _ := dec.Check(rb.unread())
		m, rerr := t.Read(rb.room(need))
		rb.w += m
		if rerr != nil {
			select {
			case <-timedOut:
				return f, &frame.Error{Code: frame.DeadlineExceeded, Message: "no HELLO from " + t.String() + " within " + timeout.String()}
			default:
			}
			if errors.Is(rerr, io.EOF) {
				if e := dec.Finish(rb.unread()); e != nil {
					return f, e
				}
				return f, &frame.Error{Code: frame.Unavailable, Message: "peer closed the connection before its HELLO"}
			}
			return f, &frame.Error{Code: frame.Unavailable, Message: "read failed during handshake: " + rerr.Error()}
		}
	}
}

// readBuf holds the bytes read and not yet parsed: b[r:w]. Frames handed
// out alias b[:r], so those bytes are never written again: when the
// buffer is full, the unread tail moves to a new one.
type readBuf struct {
	b    []byte
	r, w int
}

const readChunk = 64 << 10

func (rb *readBuf) unread() []byte { return rb.b[rb.r:rb.w] }

// room returns space to read into: at least 4 KiB, and the whole of a
// frame of need bytes whose header is already buffered.
func (rb *readBuf) room(need int) []byte {
	want := max(need-(rb.w-rb.r), 4096)
	if len(rb.b)-rb.w < want {
		size := max(readChunk, (rb.w-rb.r)+want)
		nb := make([]byte, size)
		copy(nb, rb.b[rb.r:rb.w])
		rb.b, rb.w, rb.r = nb, rb.w-rb.r, 0
	}
	return rb.b[rb.w:]
}
