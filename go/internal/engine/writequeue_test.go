package engine

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"hubwire.dev/go/frame"
	"hubwire.dev/go/transport"
)

// The write queue's cap (Options.WriteQueue) over TCP: a raw peer sends
// HELLO, then echo REQUESTs, and does not read. The bytes queued for it
// stay within wqBound, the provider stops reading its new calls (so its
// writes stop at its full socket), and then either it reads again and
// gets every answer, or it does not and is closed with GOAWAY
// resource_exhausted after the stall timeout.

const (
	wqPayload = 16 << 10
	wqCap     = 64 << 10
	// An echo answer's frame: header, code and message length, the payload.
	wqAnswer = 12 + 3 + wqPayload
	// Requests the raw peer offers at most: 128 MiB, far beyond what the
	// sockets hold (a few MiB) plus what the provider refuses past
	// max_calls before its queue is over the cap (cheap 68-byte refusals:
	// hundreds while its handlers wait for a processor).
	wqOffered = 8192
	// The provider's max_calls. The raw peer ignores it (it reads no
	// answer), so past it the provider refuses with resource_exhausted.
	wqMaxCalls = 16
	// wqBound is what may be queued for the raw peer once its writes have
	// stopped: wqCap + (wqMaxCalls+1) × wqAnswer = 344,319 bytes.
	//
	// The reader takes (or refuses) a REQUEST only after finding at most
	// wqCap bytes queued (reader.go), and the raw peer sends nothing else
	// that makes a frame (no PING, no stream). So what is queued after it
	// checked the last REQUEST it took is: the answers of the calls it had
	// taken and not yet answered, at most wqMaxCalls (a call holds its
	// max_calls slot until its RESPONSE is queued: serve.go), and that
	// REQUEST's answer (a slot may free between the two checks) or its
	// 68-byte refusal. That is spec/PROTOCOL.md §7.4: answers to calls
	// already running still queue, bounded by max_calls.
	//
	// Not wqCap + wqAnswer: that holds only while every echo runs inline,
	// the reader taking the next call once the last is answered. Once one
	// inline run spans a millisecond (a busy machine deschedules it), the
	// watchdog (inline.go) moves echo to goroutines for a second, and the
	// reader takes calls faster than they answer, up to max_calls: with
	// the default of 4096, 124 KB to 2.7 MB were queued, 1 run in 5.
	wqBound = wqCap + (wqMaxCalls+1)*wqAnswer
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
	e := &echo{}
	c, raw := wqOpen(t, Options{Service: e, WriteQueue: wqCap, WriteStallTimeout: stall, MaxCalls: wqMaxCalls})
	return c, e, raw
}

// wqOpen opens a provider with o over TCP, and a raw peer connected to it
// that has sent its HELLO.
func wqOpen(t *testing.T, o Options) (*Core, net.Conn) {
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
	c, err := Open(tr, o, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, raw
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
	if q := c.writer.queuedNow(); q > wqBound {
		t.Errorf("%d bytes queued for a peer that does not read (cap %d, bound %d)", q, wqCap, wqBound)
	}
	if sent == wqOffered {
		t.Fatalf("all %d requests went out: nothing held the peer back", sent)
	}
	c.mu.Lock()
	last := c.calls.lastPeerID
	c.mu.Unlock()
	if last == uint32(2*sent-1) {
		t.Errorf("the provider read all %d requests of a peer that does not read", sent)
	}
	// Now read: every request sent whole is answered once, with its echo
	// or, past max_calls, a refusal; none lost.
	dec := frame.NewDecoder(^uint32(0))
	var buf []byte
	chunk := make([]byte, 64<<10)
	raw.SetReadDeadline(time.Now().Add(time.Minute))
	hello, answered, echoed := false, 0, 0
	seen := make([]bool, sent)
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
			if !hello && f.Type == frame.TypeHello {
				hello = true
				continue
			}
			i := int(f.CallID-1) / 2
			if f.Type != frame.TypeResponse || f.CallID%2 != 1 || i >= sent || seen[i] {
				t.Fatalf("unexpected frame %v for call %d after %d answers", f.Type, f.CallID, answered)
			}
			switch {
			case f.Code == frame.OK && len(f.Payload) == wqPayload:
				echoed++
			case f.Code == frame.ResourceExhausted && strings.Contains(string(f.Message), "max_calls"):
				// More than wqMaxCalls of its calls were in flight.
			default:
				t.Fatalf("call %d answered %v: %s", f.CallID, f.Code, f.Message)
			}
			seen[i] = true
			answered++
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
	if n := e.calls.Load(); int64(echoed) != n {
		t.Errorf("%d echoes for %d calls served", echoed, n)
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

// holder serves "hold", whose handler returns with its own context's lock
// taken, and "echo".
type holder struct{ held chan *CallContext }

func (h *holder) Methods() []frame.MethodInfo {
	return []frame.MethodInfo{{Name: "hold", Kind: frame.Unary}, {Name: "echo", Kind: frame.Unary}}
}

func (h *holder) Call(ctx context.Context, in *Incoming) (Payload, error) {
	if in.Method == "hold" {
		cc := ctx.(*CallContext)
		cc.mu.Lock()
		h.held <- cc
	}
	return in.Input, nil
}

// A served call keeps its max_calls slot until its RESPONSE is queued, not
// only until it leaves the table of calls served (which it must do first:
// the peer may reuse the id once it has the RESPONSE). Between the two the
// goroutine that answers may wait (for a processor, for a lock), and a
// reader that took a new call in its slot meanwhile would let answers
// queued for a peer that does not read exceed max_calls. Here the wait is
// the handler's own context's lock, which finish takes in between.
func TestACallHoldsItsSlotUntilItsAnswerIsQueued(t *testing.T) {
	h := &holder{held: make(chan *CallContext, 1)}
	c, raw := wqOpen(t, Options{Service: h, MaxCalls: 1})
	request := func(id uint32, method string) {
		t.Helper()
		if _, err := raw.Write(frame.AppendRequestHead(nil, id, frame.Unary, frame.Raw, 0, method, 0)); err != nil {
			t.Fatal(err)
		}
	}
	// until polls cond (under c.mu) for up to 10 s.
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			c.mu.Lock()
			ok := cond()
			c.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
		}
	}
	request(1, "hold")
	var cc *CallContext
	select {
	case cc = <-h.held:
	case <-time.After(10 * time.Second):
		t.Fatal("call 1 did not reach its handler")
	}
	release := sync.OnceFunc(cc.mu.Unlock)
	defer release()
	until("call 1 leaves the table", func() bool { return len(c.calls.served) == 0 })
	// Call 1 has answered but its RESPONSE is not queued. Call 1 ran on
	// the reader, so call 3 is read by the goroutine the watchdog hands
	// reading to (inline.go).
	request(3, "echo")
	until("call 3 is read", func() bool { return c.calls.lastPeerID == 3 })
	release()
	dec := frame.NewDecoder(^uint32(0))
	var buf []byte
	chunk := make([]byte, 4096)
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := map[uint32]frame.Code{}
	for len(got) < 2 {
		f, n, err := dec.Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			m, err := raw.Read(chunk)
			if err != nil {
				t.Fatalf("read failed with answers %v: %v", got, err)
			}
			buf = append(buf, chunk[:m]...)
			continue
		}
		buf = buf[n:]
		if f.Type == frame.TypeResponse {
			got[f.CallID] = f.Code
		}
	}
	if got[1] != frame.OK || got[3] != frame.ResourceExhausted {
		t.Errorf("call 1 answered %v, call 3 %v; want ok, then resource_exhausted: call 3 came while call 1 held the one slot", got[1], got[3])
	}
}
