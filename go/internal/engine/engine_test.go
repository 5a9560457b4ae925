package engine

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"hubwire.dev/go/transport"
)

func TestIdsKeepTheSidesParityAndWrapAround(t *testing.T) {
	d, a := newCallTable(true), newCallTable(false)
	if got := []uint32{d.allocID(), d.allocID(), d.allocID()}; got[0] != 1 || got[1] != 3 || got[2] != 5 {
		t.Fatalf("dialer ids %v", got)
	}
	if got := []uint32{a.allocID(), a.allocID()}; got[0] != 2 || got[1] != 4 {
		t.Fatalf("acceptor ids %v", got)
	}
	d.nextID = ^uint32(0) - 2
	d.out[1] = &outCall{} // still in flight from the first lap
	if got := []uint32{d.allocID(), d.allocID(), d.allocID()}; got[0] != ^uint32(0)-2 || got[1] != ^uint32(0) || got[2] != 3 {
		t.Fatalf("wrap-around: %v, want the last two odd ids then 3 (1 is in flight)", got)
	}
	a.nextID = ^uint32(0) - 1
	if got := []uint32{a.allocID(), a.allocID()}; got[0] != ^uint32(0)-1 || got[1] != 2 {
		t.Fatalf("acceptor wrap-around: %v", got)
	}
}

func TestCreditGoesBackInBatchesOfHalfTheWindow(t *testing.T) {
	w := newRecvWindow(8)
	for range 8 {
		if !w.onItem() {
			t.Fatal("an item within the window was refused")
		}
	}
	if w.onItem() {
		t.Fatal("the ninth item overran a window of 8 and was accepted")
	}
	for i := range 3 {
		if c := w.consumedOne(); c != 0 {
			t.Fatalf("consumed %d: granted %d early", i+1, c)
		}
	}
	if c := w.consumedOne(); c != 4 {
		t.Fatalf("the fourth consumed item completes a batch of 4, got %d", c)
	}
	for range 4 {
		if !w.onItem() {
			t.Fatal("granted credit was not counted")
		}
	}
	if w.onItem() {
		t.Fatal("an item beyond the new credit was accepted")
	}
	one := newRecvWindow(1)
	one.onItem()
	if one.consumedOne() != 1 || !one.onItem() {
		t.Fatal("a window of 1 grants after every item")
	}
}

func TestEfficientNeverSpinsAndLowLatencyBacksOff(t *testing.T) {
	a, b := transport.Pair()
	defer a.Close()
	defer b.Close()
	p := make([]byte, 16)
	s := newSpinner(WaitEfficient, DefaultSpin)
	if _, _, ok := s.spin(a, p); ok || s.enabled() {
		t.Fatal("efficient mode spun")
	}
	s = spinner{budget: 20 * time.Microsecond}
	for range failsBeforeBackoff {
		if _, _, ok := s.spin(a, p); ok {
			t.Fatal("found bytes on an empty transport")
		}
	}
	b.Write([][]byte{[]byte("x")})
	if _, _, ok := s.spin(a, p); ok {
		t.Fatal("a backed-off spinner must skip, not spin")
	}
	if n, err, ok := s.spin(a, p); !ok || n != 1 || err != nil || s.fails != 0 {
		t.Fatalf("after the skip a spin that finds bytes resets the back-off: %d %v %v fails=%d", n, err, ok, s.fails)
	}
}

// recorder is a transport that records every write and never blocks.
type recorder struct {
	transport.Transport
	mu     sync.Mutex
	writes [][]byte
}

func (r *recorder) TryWrite(bufs [][]byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := bytes.Join(bufs, nil)
	r.writes = append(r.writes, all)
	return len(all), nil
}

func (r *recorder) Write(bufs [][]byte) (int, error) { return r.TryWrite(bufs) }

func (r *recorder) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.writes...)
}

func TestWriterCoalesces(t *testing.T) {
	r := &recorder{}
	w := newWriter(r, DefaultWriteQueue)
	w.push([]byte{1, 1, 1}, nil, false)
	w.push([]byte{2, 2, 2}, []byte("p"), false)
	if got := r.got(); len(got) != 2 || !bytes.Equal(got[1], []byte{2, 2, 2, 'p'}) {
		t.Fatalf("a frame alone is written at once: %v", got)
	}
	w.cork()
	for i := byte(3); i <= 5; i++ {
		w.push([]byte{i}, nil, false)
	}
	if len(r.got()) != 2 {
		t.Fatal("written while corked")
	}
	w.uncork()
	if got := r.got(); len(got) != 3 || !bytes.Equal(got[2], []byte{3, 4, 5}) {
		t.Fatalf("frames pushed while corked leave in one write at uncork: %v", got)
	}
	big := bytes.Repeat([]byte{9}, copyLimit+1)
	w.push([]byte{6}, big, false)
	if got := r.got(); len(got) != 4 || len(got[3]) != 1+len(big) {
		t.Fatalf("a large payload goes out with its header: %d writes", len(got))
	}
	w.close("done")
	if err := w.push([]byte{7}, nil, false); err == nil {
		t.Fatal("a closed writer took a frame")
	}
}

// choppy is a transport whose writes take a few bytes at a time and
// sometimes none, and which fails the test if two goroutines write at once.
type choppy struct {
	transport.Transport
	mu      sync.Mutex
	out     []byte
	n       int
	writing sync.Mutex
	t       *testing.T
}

func (c *choppy) write(bufs [][]byte, some bool) (int, error) {
	if !c.writing.TryLock() {
		c.t.Error("two goroutines wrote at once")
		return 0, transport.ErrWouldBlock
	}
	defer c.writing.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if some && c.n%3 == 0 {
		return 0, transport.ErrWouldBlock
	}
	all := bytes.Join(bufs, nil)
	if some {
		all = all[:min(len(all), 7)]
	}
	c.out = append(c.out, all...)
	return len(all), nil
}

func (c *choppy) TryWrite(bufs [][]byte) (int, error) { return c.write(bufs, true) }
func (c *choppy) Write(bufs [][]byte) (int, error)    { return c.write(bufs, false) }

func TestWriterKeepsFramesWholeUnderContention(t *testing.T) {
	c := &choppy{t: t}
	w := newWriter(c, DefaultWriteQueue)
	const writers, each = 8, 300
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				frame := []byte{'<', byte(g), byte(i), byte(i >> 8)}
				payload := bytes.Repeat([]byte{byte(g)}, i%5)
				if i%50 == 0 {
					payload = bytes.Repeat([]byte{byte(g)}, copyLimit+1) // a separate segment
				}
				frame = append(frame, byte(len(payload)), byte(len(payload)>>8))
				w.push(frame, payload, i%2 == 0)
			}
		})
	}
	wg.Wait()
	w.flushed(5 * time.Second)
	c.mu.Lock()
	out := c.out
	c.mu.Unlock()
	seen := map[[3]byte]bool{}
	for len(out) > 0 {
		if len(out) < 6 || out[0] != '<' {
			t.Fatalf("a frame was cut or interleaved at %d bytes from the end", len(out))
		}
		g, n := out[1], int(out[4])|int(out[5])<<8
		key := [3]byte{g, out[2], out[3]}
		if seen[key] || len(out) < 6+n || !bytes.Equal(out[6:6+n], bytes.Repeat([]byte{g}, n)) {
			t.Fatalf("frame %v duplicated or its payload mixed", key)
		}
		seen[key] = true
		out = out[6+n:]
	}
	if len(seen) != writers*each {
		t.Fatalf("%d of %d frames written", len(seen), writers*each)
	}
}
