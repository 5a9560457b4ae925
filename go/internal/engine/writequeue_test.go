package engine

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"hubwire.dev/go/frame"
	"hubwire.dev/go/transport"
)

// The write queue's cap (Options.WriteQueue) over TCP: a raw peer sends
// HELLO, then echo REQUESTs, and does not read. The bytes queued for it
// stay within the cap and one answer, the provider stops reading its new
// calls (so its writes stop at its full socket), and then either it reads
// again and gets every answer, or it does not and is closed with GOAWAY
// resource_exhausted after the stall timeout.

const (
	wqPayload = 16 << 10
	wqCap     = 64 << 10
	// An echo answer's frame: header, code and message length, the payload.
	wqAnswer = 12 + 3 + wqPayload
	// Requests the raw peer offers at most: 32 MiB, far beyond what the sockets hold.
	wqOffered = 2048
	// How long a write may make no progress before the peer's writes count
	// as stopped (a pause, not an assertion).
	wqStopped = 300 * time.Millisecond
)

// echo answers each unary call with its input, counting the calls.
type echo struct{ calls atomic.Int64 }

func (e *echo) Methods() []frame.MethodInfo {
	return []frame.MethodInfo{{Name: "echo", Kind: frame.Unary}}
}

func (e *echo) Call(_ context.Context, in *Incoming) (Payload, error) {
	e.calls.Add(1)
	return in.Input, nil
}

// wqSetup opens a provider with the cap and stall given, and a raw peer
// connected to it that has sent its HELLO.
func wqSetup(t *testing.T, stall time.Duration) (*Core, *echo, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	hello := (&frame.Frame{Type: frame.TypeHello, Hello: frame.NewHello(frame.PeerInfo{Name: "raw", Lang: "test", Version: "0"})}).Append(nil)
	if _, err := raw.Write(hello); err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.NewConn(s, "raw")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{}
	c, err := Open(tr, Options{Service: e, WriteQueue: wqCap, WriteStallTimeout: stall}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, e, raw
}

// wqFlood writes echo REQUESTs (ids 1, 3, …) until all are written or a
// write makes no progress for wqStopped; returns how many went out whole.
func wqFlood(t *testing.T, raw net.Conn) int {
	t.Helper()
	payload := make([]byte, wqPayload)
	sent := 0
	for ; sent < wqOffered; sent++ {
		req := frame.AppendRequestHead(nil, uint32(2*sent+1), frame.Unary, frame.Raw, 0, "echo", len(payload))
		raw.SetWriteDeadline(time.Now().Add(wqStopped))
		if _, err := raw.Write(append(req, payload...)); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write failed: %v", err)
			}
			break
		}
	}
	raw.SetWriteDeadline(time.Time{})
	return sent
}

func (w *writer) queuedNow() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queued
}

func TestAPeerThatDoesNotReadIsHeldBackThenAnswered(t *testing.T) {
	c, e, raw := wqSetup(t, time.Hour)
	sent := wqFlood(t, raw)
	if q := c.writer.queuedNow(); q > wqCap+wqAnswer {
		t.Errorf("%d bytes queued for a peer that does not read (cap %d)", q, wqCap)
	}
	if sent == wqOffered {
		t.Fatalf("all %d requests went out: nothing held the peer back", sent)
	}
	if n := e.calls.Load(); n >= int64(sent) {
		t.Errorf("the provider took all %d calls from a peer that does not read", n)
	}
	// Now read: every request sent whole is answered, none lost.
	dec := frame.NewDecoder(^uint32(0))
	var buf []byte
	chunk := make([]byte, 64<<10)
	raw.SetReadDeadline(time.Now().Add(time.Minute))
	hello, answered := false, 0
	for answered < sent {
		for {
			f, n, ferr := dec.Decode(buf)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if n == 0 {
				break
			}
			buf = buf[n:]
			switch {
			case !hello && f.Type == frame.TypeHello:
				hello = true
			case f.Type == frame.TypeResponse && f.Code == frame.OK && len(f.Payload) == wqPayload:
				answered++
			default:
				t.Fatalf("unexpected frame %v (code %v) after %d answers", f.Type, f.Code, answered)
			}
		}
		if answered == sent {
			break
		}
		n, err := raw.Read(chunk)
		if err != nil {
			t.Fatalf("read failed after %d of %d answers: %v", answered, sent, err)
		}
		buf = append(buf, chunk[:n]...)
	}
}

func TestAPeerThatNeverReadsIsClosedWithResourceExhausted(t *testing.T) {
	// Longer than the flood takes to see its writes stop, so that it has
	// stopped writing when the provider closes.
	c, _, raw := wqSetup(t, 3*wqStopped)
	wqFlood(t, raw)
	select {
	case <-c.Done():
	case <-time.After(time.Minute):
		t.Fatal("the connection is still open a minute later")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "resource_exhausted") {
		t.Errorf("closed with %v, want GOAWAY resource_exhausted", err)
	}
	// The socket is closed: reading ends (the GOAWAY itself reaches only a
	// peer that reads within a second of it, as in the Rust runtime: the
	// writer then drops what the peer left unread).
	chunk := make([]byte, 64<<10)
	raw.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		_, err := raw.Read(chunk)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the socket is still open a minute later")
		}
		if err != nil {
			break
		}
	}
}
